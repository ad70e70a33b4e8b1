"""What a client operation asks its face to do, and the stepper both faces drive it with.

An operation (queue_server/client/operations.py) is a generator: it yields an effect
(send these bytes, read a reply, both, sleep, open or half-close a connection), and gets
back the result, or the exception the face met, thrown in at the yield. QueueClient
performs effects by blocking, AsyncQueueClient by awaiting; every decision stays in the
operation.
"""
from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from queue_server.protocol.reply_reading import Parser
from queue_server.protocol.requests import Address

T = TypeVar("T")
# Effects are slots dataclasses, not frozen ones: one is made per request, and a frozen
# dataclass's __init__ takes three times as long (0.56 against 0.18 us).


@dataclass(slots=True)
class Send:
    """Write all of `data` on the connection; the result is None."""

    conn: Any
    data: bytes = field(repr=False)  # an AUTH token, job data: never in a log line


@dataclass(slots=True)
class Read:
    """The next reply on the connection, parsed by `parse`.

    `timeout_s` None waits without limit, CLIENT_TIMEOUT is the client's own timeout_s;
    TimeoutError past it (the bytes read so far are kept for the next Read).
    `wake_fd` (blocking client only) ends a wait with WaitWoken when readable first, the
    connection left as it was (queue_server/client/wait_check.py gives the wait up).
    """

    conn: Any
    parse: Parser[Any]
    timeout_s: float | None
    wake_fd: int | None = None


@dataclass(slots=True)
class Request:
    """Send and Read in one effect: a request's bytes, then its reply (the common case,
    one step of the operation instead of two)."""

    conn: Any
    data: bytes = field(repr=False)  # an AUTH token, job data: never in a log line
    parse: Parser[Any]
    timeout_s: float | None


@dataclass(slots=True)
class Sleep:
    """A pause; with `wake_fd` (blocking client only) it ends with WaitWoken when that fd
    is readable first (a slot told to stop while it follows a failover)."""

    seconds: float
    wake_fd: int | None = None


@dataclass(slots=True)
class HalfClose:
    """Send the connection's end (shutdown for writing): a server drops a waiter whose
    client is gone, and closes after any reply it had sent; nothing more goes on it."""

    conn: Any


@dataclass(slots=True)
class Open:
    """A new connection to `address` within connect_timeout_s; OSError when unreachable."""

    address: Address


Effect = Request | Send | Read | Sleep | Open | HalfClose
Op = Generator[Effect, Any, T]


def drive(op: Op[T], perform: Callable[[Effect], Any]) -> T:
    """Run `op` to its end, each effect performed by `perform`, blocking (the asyncio client
    has the same loop with an await, which a plain function cannot hold)."""
    send, throw = op.send, op.throw
    try:
        effect = send(None)
        while True:
            try:
                value = perform(effect)
            except BaseException as exc:  # the operation decides what the failure means
                effect = throw(exc)
            else:
                effect = send(value)
    except StopIteration as stop:
        return cast(T, stop.value)
