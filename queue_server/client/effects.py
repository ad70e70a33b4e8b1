"""What a client operation asks its face to do, and the stepper both faces drive it with.

An operation (queue_server/client/operations.py) is a generator: it yields an effect
(send these bytes, read a reply, sleep, open a connection), and gets back the result,
or the exception the face met, thrown in at the yield. QueueClient performs effects by
blocking, AsyncQueueClient by awaiting; every decision stays in the operation.
"""
from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from queue_server.protocol.reply_reading import Parser
from queue_server.protocol.requests import Address

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Send:
    """Write all of `data` on the connection; the result is None."""

    conn: Any
    data: bytes


@dataclass(frozen=True, slots=True)
class Read:
    """The next reply on the connection, parsed by `parse`.

    `timeout_s` None waits without limit, CLIENT_TIMEOUT is the client's own timeout_s.
    `wake_fd` (blocking client only) ends a wait with WaitWoken when readable first.
    """

    conn: Any
    parse: Parser[Any]
    timeout_s: float | None
    wake_fd: int | None = None


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class Open:
    """A new connection to `address` within connect_timeout_s; OSError when unreachable."""

    address: Address


Effect = Send | Read | Sleep | Open
Op = Generator[Effect, Any, T]


class Stepper(Generic[T]):
    """An operation on its way: the effect it waits on (None once it returned `result`)."""

    __slots__ = ("_op", "effect", "result")

    def __init__(self, op: Op[T]) -> None:
        self._op = op
        self.result: T | None = None
        self.effect: Effect | None = self._step(op.send, None)

    def value(self) -> T:
        """What the operation returned (once `effect` is None)."""
        return cast(T, self.result)

    def resume(self, value: object) -> None:
        """The effect's result goes back into the operation."""
        self.effect = self._step(self._op.send, value)

    def fail(self, exc: BaseException) -> None:
        """The effect failed: the operation sees `exc` raised where it yielded."""
        self.effect = self._step(self._op.throw, exc)

    def _step(self, step: Callable[[Any], Effect], value: Any) -> Effect | None:
        try:
            return step(value)
        except StopIteration as stop:
            self.result = stop.value
            return None
