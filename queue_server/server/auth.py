"""AUTH at a connection's door: before the token only AUTH runs, and a wrong token's 401
is held back (guard.py decides how long) with the connection's reading on hold."""
from __future__ import annotations

import asyncio
import logging

from queue_server.protocol.commands import MAX_LINE_BYTES, Auth, Command, Parsed, parse_line
from queue_server.protocol.errors import ProtocolError
from queue_server.server import guard, responses
from queue_server.server.faces import Conn
from queue_server.server.grants import CLONE, Grant

MAX_LOGGED_REASONS = 32  # distinct refusals logged per connection (queue globs vary)
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
    matched, grant = conn.server.grants.match(command.token)
    if matched:
        take_grant(conn, grant)
        conn.authenticated = True
        conn.reader.max_line_bytes = MAX_LINE_BYTES
        conn.server.door.authenticated(conn)
        conn.write(responses.OK)
        return False
    return _wrong_token(conn)


def _wrong_token(conn: Conn) -> bool:
    """A wrong AUTH, before or after a right one: counted per connection, its 401 held
    back, the connection closed at the last failure allowed."""
    conn.auth_failures += 1
    last = conn.auth_failures >= guard.MAX_AUTH_FAILURES
    delay_s = guard.auth_delay_s(conn.auth_failures)
    log.warning("wrong AUTH from %s (failure %d of %d on this connection): the 401 is held "
                "back %.1f s%s", conn.peer, conn.auth_failures, guard.MAX_AUTH_FAILURES,
                delay_s, ", then the connection is closed" if last else "")
    conn.hold_reading(HOLD_AUTH)
    asyncio.get_running_loop().call_later(delay_s, _penalty_served, conn, last)
    return True


def take_grant(conn: Conn, grant: Grant | None) -> None:
    """The connection acts under `grant` from now on (None: unlimited). A whole state
    (CLONE) bigger than a job is let in only from the admin or the cluster."""
    conn.grant = grant
    conn.fast_put = grant is None or grant.may_put_anywhere
    conn.may_send_states = grant is None or CLONE in grant.rights


def reauthenticate(conn: Conn, command: Auth) -> None:
    """AUTH on an authenticated connection: a configured token switches its role; a wrong
    one changes nothing and is held back and counted as before AUTH: a producer's token
    must not buy unlimited fast guesses at the admin's (they were 0.05 ms each)."""
    server = conn.server
    if not server.grants.required:
        conn.write(responses.OK)
        return
    matched, grant = server.grants.match(command.token)
    if matched:
        take_grant(conn, grant)
        conn.write(responses.OK)
    else:
        _wrong_token(conn)


def refuse(conn: Conn, why: str, command: Command) -> None:
    """A command the connection's role may not send: one line naming the role it needs,
    counted, and logged once per connection and reason (a client retrying in a loop must
    not flood the log)."""
    grant = conn.grant
    assert grant is not None
    conn.write(b"403 Forbidden: %s\r\n" % why.encode("ascii", "replace"))
    grants = conn.server.grants
    grants.refused[grant.role.value] += 1
    logged = conn.refusals_logged
    if logged is None:
        logged = conn.refusals_logged = set()
    if why not in logged and len(logged) < MAX_LOGGED_REASONS:
        logged.add(why)
        log.warning("refused from %s%s (%s role): %s (logged once per connection and reason; "
                    "%d refusal(s) so far)", conn.peer, f" ({conn.door})" if conn.door else "",
                    grant.role.value, why, sum(grants.refused.values()))


def _penalty_served(conn: Conn, close: bool) -> None:
    if conn.closing or conn.transport is None or conn.transport.is_closing():
        return
    if close:
        conn.hold = None
        conn.fail(responses.UNAUTHORIZED)
        return
    conn.write(responses.UNAUTHORIZED)
    conn.release_hold()
