"""A late reply, read alike by both clients (core.py chooses which read a request gets).

- A wait (a blocking GET, RESULT ... TIMEOUT): wait(). Every WAIT_CHECK_S (follow.py) with
  no reply the server is asked for a PING on a new connection (answers()); one that does
  not answer is frozen, and the wait is given up (given_up(), as a wake gives it up)
  without losing a reply the server had sent.
- A request that follows the primary (`until`: DONE, LATER, FAIL, TOUCH, a reply's PUT),
  or that may go again (a read, a keyed PUT: until the client's timeout_s, follow.py
  resends_until), with no reply within FOLLOW_CHECK_S: held_reply(). The server is asked for ROLE on a new
  connection (holds()): a live primary that may still send the reply holds it (sync mode,
  for its replicas), and it is waited for, never sent again; a silent server, a replica
  or a primary whose lease lapsed is left for the primary found anew.
Both checks are one probe (_asked): a new connection, AUTH if the client has a token, the
question, each within the client's connect_timeout_s.
"""
from __future__ import annotations

import time
from typing import Any, Final, Protocol, TypeVar

from queue_server.client.effects import HalfClose, Op, Open, Read, Request
from queue_server.client.follow import FOLLOW_TAIL_S, WAIT_TAIL_S
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import QueueServerError, WaitWoken
from queue_server.protocol.reply_parsers import parse_holding, parse_ok
from queue_server.protocol.reply_reading import Parser
from queue_server.protocol.requests import Address

T = TypeVar("T")
GIVEN_UP: Final = "the server left a PING on a new connection unanswered: the wait was given up"
SILENT: Final = ("the server left ROLE on a new connection unanswered, or no longer acknowledges: "
                 "its reply was given up")
PAST_DEADLINE: Final = "no reply before the request's deadline"


class Checking(Protocol):
    """What a check needs of the client (queue_server/client/core.py ClientCore)."""

    _auth: bytes | None
    connect_timeout_s: float
    timeout_s: float


def answers(client: Checking, address: Address) -> Op[bool]:
    """False when the server refuses the connection or leaves AUTH or PING unanswered (a
    frozen one accepts in its kernel and never answers); an error reply is an answer."""
    return (yield from _asked(client, address, req.PING, parse_ok))


def holds(client: Checking, address: Address) -> Op[bool]:
    """As answers(), asking ROLE: also False for a server that says it may never send a
    reply it holds (reply_parsers.py parse_holding: a replica, a primary whose lease lapsed)."""
    return (yield from _asked(client, address, req.ROLE, parse_holding))


def _asked(client: Checking, address: Address, request: bytes, parse: Parser[Any]) -> Op[bool]:
    """Whether the server answered `request` on a new connection within the client's
    connect_timeout_s (for the connection and each reply); False also when `parse` says
    False of the answer (parse_holding)."""
    try:
        conn = yield Open(address)
    except OSError:  # refused, unreachable, or the connect timed out
        return False
    try:
        if client._auth is not None:
            yield Request(conn, client._auth, parse_ok, client.connect_timeout_s)
        answer = yield Request(conn, request, parse, client.connect_timeout_s)
    except (OSError, EOFError):  # no reply in time (TimeoutError), or the connection cut
        return False
    except QueueServerError:  # 401, 403 or 500: refused, but by a server that runs
        return True
    finally:
        conn.close()
    return answer is not False


def wait(client: Checking, conn: Any, parse: Parser[T], *, timeout_s: float | None,
         check_s: float | None, wake_fd: int | None) -> Op[T]:
    """The reply to a wait sent on `conn`, within `timeout_s` (None: without limit). Every
    `check_s` (None: never) with no reply, answers() asks the server on a new connection:
    an answer leaves the wait as it was (its connection, its place in the server's line);
    none gives it up, and the EOFError of a lost connection sends the request to the
    primary found anew (core.py). A wake (`wake_fd`, blocking client) gives it up too:
    WaitWoken, unless a reply came first. TimeoutError past `timeout_s`."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        left_s = None if deadline is None else max(0.0, deadline - time.monotonic())
        read_s = check_s if left_s is None else left_s if check_s is None else min(check_s, left_s)
        try:
            return (yield Read(conn, parse, read_s, wake_fd))
        except TimeoutError:
            if read_s == left_s:
                raise  # the wait's own timeout
            if (yield from answers(client, conn.address)):
                continue
            return (yield from given_up(client, conn, parse, woken=False))
        except WaitWoken:
            return (yield from given_up(client, conn, parse, woken=True))


def given_up(client: Checking, conn: Any, parse: Parser[T], *, woken: bool) -> Op[T]:
    """Half-close, so the server drops the waiter and closes: a server answers a waiter or
    sees the EOF, in that order on one loop, so a reply it sent first is read here, not
    lost. It is read for WAIT_TAIL_S: a server silent to the check sends nothing more; a
    woken wait's server silent that long is asked (answers()) and, live, read to its EOF
    within the client's timeout_s, else left: before, a slot woken (a stop, a retarget) on
    a frozen primary read for the client's 30 s. WaitWoken after a wake, else EOFError."""
    tail_s: float | None = WAIT_TAIL_S
    ended: OSError | EOFError | None = None
    try:
        yield HalfClose(conn)
        while tail_s is not None:
            try:
                return (yield Read(conn, parse, tail_s))
            except TimeoutError:
                live = woken and tail_s == WAIT_TAIL_S and (yield from answers(client, conn.address))
                tail_s = client.timeout_s if live else None
    except (OSError, EOFError) as exc:  # the server closed (or reset) it: no reply came
        ended = exc
    if woken:
        raise WaitWoken() from ended
    raise EOFError(GIVEN_UP) from ended


def held_reply(client: Checking, conn: Any, parse: Parser[T], *, until: float,
               check_s: float) -> Op[T]:
    """The reply to a request that follows the primary until `until` and had none within
    `check_s`. A primary that answers ROLE on a new connection (at once: a fresh connection
    holds nothing) runs, so it holds the reply (sync mode, for its replicas: up to
    sync_timeout_s plus the manager's consent, and with `sync_fallback = "refuse"` until a
    replica confirms): it is read on the same connection, asked again every `check_s`,
    until `until`. Sent again meanwhile, a PUT without a key would be stored twice. A
    server that does not answer is frozen, and one whose ROLE says it may never send the
    reply (holds()) is left too: TimeoutError, after reading for FOLLOW_TAIL_S what it sent
    meanwhile, and the request goes to the primary found anew."""
    while True:
        live = yield from holds(client, conn.address)
        wait_s = min(check_s, until - time.monotonic()) if live else 0.0
        try:
            return (yield Read(conn, parse, max(wait_s, FOLLOW_TAIL_S)))
        except TimeoutError:
            if not live:
                raise TimeoutError(SILENT) from None
            if time.monotonic() >= until:
                raise TimeoutError(PAST_DEADLINE) from None


def followed_read(client: Checking, conn: Any, parse: Parser[T], *, until: float,
                  check_s: float) -> Op[T]:
    """The next reply to a request that follows the primary: `check_s` for it, then held_reply."""
    try:
        return (yield Read(conn, parse, check_s))
    except TimeoutError:
        return (yield from held_reply(client, conn, parse, until=until, check_s=check_s))
