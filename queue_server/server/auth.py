"""AUTH at a connection's door: before the token only AUTH runs, and a wrong token's 401
is held back (guard.py decides how long) with the connection's reading on hold."""
from __future__ import annotations

import asyncio
import hmac
import logging

from queue_server.protocol.commands import MAX_LINE_BYTES, Auth, Parsed, parse_line
from queue_server.protocol.errors import ProtocolError
from queue_server.server import guard, responses
from queue_server.server.faces import Conn

HOLD_AUTH = "auth"  # a wrong AUTH: reading waits until its delayed 401 is sent

log = logging.getLogger("slotmap.queue_server")


def before_auth(conn: Conn, line: bytes) -> bool:
    """A token is set and this connection has not sent it: only AUTH runs. A data block
    is swallowed to keep the stream in step, but never one over max_job_bytes, and all it
    sends before AUTH (lines and blocks) is bounded by unauthenticated_input_bytes (door.py)."""
    kind = guard.cross_protocol(line)
    if kind is not None:
        return conn.refuse_cross_protocol(kind)
    conn.unauthenticated_left -= len(line) + 2
    if conn.unauthenticated_left < 0:
        conn.fail(responses.AUTH_REQUIRED)
        return True
    try:
        parsed = parse_line(line)
    except ProtocolError as error:
        conn.write(error.reply + b"\r\n" if line.split(None, 1)[0] == b"AUTH"
                   else responses.AUTH_REQUIRED)
        return False
    if isinstance(parsed.command, Auth):
        return _authenticate(conn, parsed.command)
    if parsed.data_len > min(conn.server.settings.max_job_bytes, conn.unauthenticated_left):
        conn.fail(responses.JOB_TOO_LARGE)
        return True
    if parsed.data_len >= 0:
        conn.unauthenticated_left -= parsed.data_len
        conn.pending = Parsed(None, parsed.data_len, ProtocolError(responses.AUTH_REQUIRED[:-2]))
    else:
        conn.write(responses.AUTH_REQUIRED)
    return False


def _authenticate(conn: Conn, command: Auth) -> bool:
    token = conn.server.token
    assert token is not None  # without a token every connection starts authenticated
    if hmac.compare_digest(command.token, token):
        conn.authenticated = conn.may_send_states = True
        conn.reader.max_line_bytes = MAX_LINE_BYTES
        conn.server.door.authenticated(conn)
        conn.write(responses.OK)
        return False
    conn.auth_failures += 1
    last = conn.auth_failures >= guard.MAX_AUTH_FAILURES
    delay_s = guard.auth_delay_s(conn.auth_failures)
    log.warning("wrong AUTH from %s (failure %d of %d on this connection): the 401 is held "
                "back %.1f s%s", conn.peer, conn.auth_failures, guard.MAX_AUTH_FAILURES,
                delay_s, ", then the connection is closed" if last else "")
    conn.hold_reading(HOLD_AUTH)
    asyncio.get_running_loop().call_later(delay_s, _penalty_served, conn, last)
    return True


def _penalty_served(conn: Conn, close: bool) -> None:
    if conn.closing or conn.transport is None or conn.transport.is_closing():
        return
    if close:
        conn.hold = None
        conn.fail(responses.UNAUTHORIZED)
        return
    conn.write(responses.UNAUTHORIZED)
    conn.release_hold()
