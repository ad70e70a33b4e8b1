"""A wait's reply (a blocking GET, RESULT ... TIMEOUT), read alike by both clients: whether
the server it waits on still answers (follow.py WAIT_CHECK_S: a PING on a new connection,
within connect_timeout_s for the connection and each reply), and how a wait is given up,
woken or on a silent server, without losing a reply the server had sent."""
from __future__ import annotations

import time
from typing import Any, Final, Protocol, TypeVar

from queue_server.client.effects import HalfClose, Op, Open, Read, Request
from queue_server.client.follow import WAIT_TAIL_S
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import QueueServerError, WaitWoken
from queue_server.protocol.reply_parsers import parse_ok
from queue_server.protocol.reply_reading import Parser
from queue_server.protocol.requests import Address

T = TypeVar("T")
GIVEN_UP: Final = "the server left a PING on a new connection unanswered: the wait was given up"


class Checking(Protocol):
    """What a check needs of the client (queue_server/client/core.py ClientCore)."""

    _auth: bytes | None
    connect_timeout_s: float
    timeout_s: float


def answers(client: Checking, address: Address) -> Op[bool]:
    """False when the server refuses the connection or leaves AUTH or PING unanswered (a
    frozen one accepts in its kernel and never answers); an error reply is an answer."""
    try:
        conn = yield Open(address)
    except OSError:  # refused, unreachable, or the connect timed out
        return False
    try:
        if client._auth is not None:
            yield Request(conn, client._auth, parse_ok, client.connect_timeout_s)
        yield Request(conn, req.PING, parse_ok, client.connect_timeout_s)
    except (OSError, EOFError):  # no reply in time (TimeoutError), or the connection cut
        return False
    except QueueServerError:  # 401 or 500: refused, but by a server that runs
        return True
    finally:
        conn.close()
    return True


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
