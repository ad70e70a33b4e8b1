"""Whether the server a request waits on still answers (follow.py): a PING on a new
connection, within connect_timeout_s for the connection and each reply. Asked by a
blocking wait (WAIT_CHECK_S) and by a request that follows the primary whose reply is
late (FOLLOW_CHECK_S: held_reply)."""
from __future__ import annotations

import time
from typing import Any, TypeVar

from queue_server.client.effects import Op, Open, Read, Request
from queue_server.client.follow import FOLLOW_TAIL_S
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import QueueServerError
from queue_server.protocol.reply_parsers import parse_ok
from queue_server.protocol.reply_reading import Parser
from queue_server.protocol.requests import Address

T = TypeVar("T")
SILENT: str = "the server left a PING on a new connection unanswered: its reply was given up"
PAST_DEADLINE: str = "no reply before the request's deadline"


def answers(address: Address, *, auth: bytes | None, timeout_s: float) -> Op[bool]:
    """False when the server refuses the connection or leaves AUTH or PING unanswered
    within `timeout_s` (a frozen one accepts in its kernel and never answers); an error
    reply is an answer. `auth`: the client's AUTH request, if it has a token."""
    try:
        conn = yield Open(address)
    except OSError:  # refused, unreachable, or the connect timed out
        return False
    try:
        if auth is not None:
            yield Request(conn, auth, parse_ok, timeout_s)
        yield Request(conn, req.PING, parse_ok, timeout_s)
    except (OSError, EOFError):  # no reply in time (TimeoutError), or the connection cut
        return False
    except QueueServerError:  # 401 or 500: refused, but by a server that runs
        return True
    finally:
        conn.close()
    return True


def held_reply(conn: Any, parse: Parser[T], *, until: float, check_s: float,
               auth: bytes | None, connect_timeout_s: float) -> Op[T]:
    """The reply to a request that follows the primary (`until`) and had none within
    `check_s`. A server that answers a PING on a new connection runs, so it holds the reply
    (sync mode, for its replicas: up to sync_timeout_s plus the manager's consent, and with
    `sync_fallback = "refuse"` until a replica confirms): it is read on the same
    connection, asked again every `check_s`, until `until`. Sent again meanwhile, a PUT
    without a key would be stored twice. A server that does not answer is frozen:
    TimeoutError, after reading for FOLLOW_TAIL_S what it sent during the PING, and the
    request goes to the primary found anew."""
    while True:
        live = yield from answers(conn.address, auth=auth, timeout_s=connect_timeout_s)
        wait_s = min(check_s, until - time.monotonic()) if live else 0.0
        try:
            return (yield Read(conn, parse, max(wait_s, FOLLOW_TAIL_S)))
        except TimeoutError:
            if not live:
                raise TimeoutError(SILENT) from None
            if time.monotonic() >= until:
                raise TimeoutError(PAST_DEADLINE) from None


def followed_read(conn: Any, parse: Parser[T], *, until: float, check_s: float,
                  auth: bytes | None, connect_timeout_s: float) -> Op[T]:
    """The next reply to a request that follows the primary: `check_s` for it, then held_reply."""
    try:
        return (yield Read(conn, parse, check_s))
    except TimeoutError:
        return (yield from held_reply(conn, parse, until=until, check_s=check_s, auth=auth,
                                      connect_timeout_s=connect_timeout_s))
