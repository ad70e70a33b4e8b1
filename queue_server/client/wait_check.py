"""Whether the server a request waits on still answers (follow.py), on a new connection
within connect_timeout_s for the connection and each reply: a PING for a blocking wait
(WAIT_CHECK_S), ROLE for a request that follows the primary whose reply is late
(FOLLOW_CHECK_S: held_reply)."""
from __future__ import annotations

import time
from typing import Any, TypeVar

from queue_server.client.effects import Op, Open, Read, Request
from queue_server.client.follow import FOLLOW_TAIL_S
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import QueueServerError
from queue_server.protocol.reply_parsers import parse_holding, parse_ok
from queue_server.protocol.reply_reading import Parser
from queue_server.protocol.requests import Address

T = TypeVar("T")
SILENT: str = ("the server left ROLE on a new connection unanswered, or no longer acknowledges: "
                "its reply was given up")
PAST_DEADLINE: str = "no reply before the request's deadline"


def answers(address: Address, *, auth: bytes | None, timeout_s: float) -> Op[bool]:
    """False when the server refuses the connection or leaves AUTH or PING unanswered
    within `timeout_s` (a frozen one accepts in its kernel and never answers); an error
    reply is an answer. `auth`: the client's AUTH request, if it has a token."""
    return (yield from _asked(address, req.PING, parse_ok, auth=auth, timeout_s=timeout_s))


def holds(address: Address, *, auth: bytes | None, timeout_s: float) -> Op[bool]:
    """As answers(), asking ROLE: also False for a server that says it may never send a
    reply it holds (reply_parsers.py parse_holding: a replica, a primary whose lease lapsed)."""
    return (yield from _asked(address, req.ROLE, parse_holding, auth=auth, timeout_s=timeout_s))


def _asked(address: Address, request: bytes, parse: Parser[Any], *, auth: bytes | None,
           timeout_s: float) -> Op[bool]:
    """Whether the server answered `request` on a new connection; False also when `parse`
    says False of the answer (parse_holding)."""
    try:
        conn = yield Open(address)
    except OSError:  # refused, unreachable, or the connect timed out
        return False
    try:
        if auth is not None:
            yield Request(conn, auth, parse_ok, timeout_s)
        answer = yield Request(conn, request, parse, timeout_s)
    except (OSError, EOFError):  # no reply in time (TimeoutError), or the connection cut
        return False
    except QueueServerError:  # 401, 403 or 500: refused, but by a server that runs
        return True
    finally:
        conn.close()
    return answer is not False


def held_reply(conn: Any, parse: Parser[T], *, until: float, check_s: float,
               auth: bytes | None, connect_timeout_s: float) -> Op[T]:
    """The reply to a request that follows the primary (`until`) and had none within
    `check_s`. A primary that answers ROLE on a new connection (at once: a fresh connection
    holds nothing) runs, so it holds the reply (sync mode, for its replicas: up to
    sync_timeout_s plus the manager's consent, and with `sync_fallback = "refuse"` until a
    replica confirms): it is read on the same connection, asked again every `check_s`,
    until `until`. Sent again meanwhile, a PUT without a key would be stored twice. A
    server that does not answer is frozen, and one whose ROLE says it may never send the
    reply (holds()) is left too: TimeoutError, after reading for FOLLOW_TAIL_S what it sent
    meanwhile, and the request goes to the primary found anew."""
    while True:
        live = yield from holds(conn.address, auth=auth, timeout_s=connect_timeout_s)
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
