"""asyncio queue server client: performs the effects of the shared operations
(queue_server/client/operations.py) on asyncio streams, by awaiting; the API of
QueueClient with coroutines, and its reconnect rule (queue_server/client/core.py).

Requests of one client are serialized by a lock, so tasks may share a client; a task
cancelled mid-request closes the connection (its reply, when it comes, would answer
the next request).
"""
from __future__ import annotations

import asyncio
import select
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import cached_property
from types import TracebackType
from typing import Any, Concatenate, Final, ParamSpec, Self, TypeVar, cast

from queue_server.client import cancels as cancel_ops
from queue_server.client import fails as fail_ops
from queue_server.client import operations as ops
from queue_server.client import results as result_ops
from queue_server.client.core import CLIENT_TIMEOUT, RECV_BYTES, ClientCore
from queue_server.client.effects import Effect, HalfClose, Op, Open, Read, Request, Send, Sleep
from queue_server.protocol.replies import Job
from queue_server.protocol.reply_reading import NEED_MORE, Parser, ReplyBuffer
from queue_server.protocol.requests import Address, Block, Then

T = TypeVar("T")
P = ParamSpec("P")

_DEFAULT: Final = CLIENT_TIMEOUT


class _Connection:
    """One stream pair, its unparsed bytes and its read loop."""

    __slots__ = ("_poll", "_timeout_s", "address", "half_closed", "reader", "replies", "server_id", "serving",
                 "writer")

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        address: Address,
        timeout_s: float,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.address = address
        self.server_id: int | None = None
        self.serving: bool | None = None
        self.replies = ReplyBuffer()
        self._timeout_s = timeout_s
        # After a wait given up (HalfClose): the server closes it, nothing more goes on it.
        self.half_closed = False
        # The loop may not have seen the server's FIN yet when the next request
        # starts: asking the socket itself keeps the "nothing sent yet" check exact.
        self._poll = select.poll()
        self._poll.register(writer.get_extra_info("socket").fileno(), select.POLLIN)

    def unusable(self) -> bool:
        """True when the server closed the connection or sent bytes nobody asked for."""
        return (
            bool(self.replies.pending)
            or self.half_closed
            or self.reader.at_eof()
            or self.reader.exception() is not None
            or self.writer.is_closing()
            or bool(self._poll.poll(0))
        )

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        if self.writer.transport.get_write_buffer_size():
            await self.writer.drain()

    async def request(self, data: bytes, parse: Parser[T], timeout_s: float | None) -> T:
        await self.send(data)
        return await self.read(parse, timeout_s)

    async def read(self, parse: Parser[T], timeout_s: float | None = _DEFAULT) -> T:
        """The next reply; `timeout_s` None waits forever, default is the client's timeout."""
        replies = self.replies
        if replies.pending:
            value = replies.take(parse)
            if value is not NEED_MORE:
                return value
        async with asyncio.timeout(self._timeout_s if timeout_s == _DEFAULT else timeout_s):
            while True:
                chunk = await self.reader.read(RECV_BYTES)
                if not chunk:
                    raise EOFError("the server closed the connection")
                replies.feed(chunk)
                value = replies.take(parse)
                if value is not NEED_MORE:
                    return value

    async def half_close(self) -> None:
        """HalfClose: the server drops the waiter and closes; nothing more goes on it."""
        self.half_closed = True
        self.writer.write_eof()

    def close(self) -> None:
        self.writer.close()


def _awaiting(
    op: Callable[Concatenate[ops.Client, P], Op[T]],
) -> Callable[Concatenate[AsyncQueueClient, P], Coroutine[Any, Any, T]]:
    """The coroutine method that runs `op` to its end, awaiting."""

    async def method(self: AsyncQueueClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(op(self, *args, **kwargs))

    return ops.as_method(method, op)


class AsyncQueueClient(ClientCore[_Connection]):
    """An asyncio client of the queue server (PROTOCOL.md); same API as QueueClient."""

    @cached_property
    def _lock(self) -> asyncio.Lock:
        return asyncio.Lock()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            try:
                await conn.writer.wait_closed()
            except OSError:
                return  # already reset by the server: closed either way

    async def _run(self, op: Op[T]) -> T:
        """effects.drive's loop, awaiting each effect."""
        send, throw = op.send, op.throw
        async with self._lock:
            try:
                effect = send(None)
                while True:
                    try:
                        value = await self._perform(effect)
                    except BaseException as exc:  # cancelled too: the operation drops the connection
                        effect = throw(exc)
                    else:
                        effect = send(value)
            except StopIteration as stop:
                return cast(T, stop.value)

    def _perform(self, effect: Effect) -> Awaitable[Any]:
        """What to await for `effect` (not a coroutine itself: one frame less per request)."""
        if isinstance(effect, Request):
            return effect.conn.request(effect.data, effect.parse, effect.timeout_s)
        if isinstance(effect, Read):
            return effect.conn.read(effect.parse, effect.timeout_s)
        if isinstance(effect, Send):
            return effect.conn.send(effect.data)
        if isinstance(effect, Sleep):
            return asyncio.sleep(effect.seconds)
        if isinstance(effect, HalfClose):
            return effect.conn.half_close()
        return self._open_stream(effect)

    async def _open_stream(self, effect: Open) -> _Connection:
        async with asyncio.timeout(self.connect_timeout_s):
            reader, writer = await asyncio.open_connection(*effect.address, limit=RECV_BYTES)
        return _Connection(reader, writer, effect.address, self.timeout_s)

    def _keep_for_late_reply(self, conn: _Connection, late_reply_s: float) -> None:
        asyncio.get_running_loop().call_later(late_reply_s, conn.close)

    async def get(
        self,
        queues: str | Sequence[str] | None = None,
        *,
        count: int | None = None,
        expire_s: float | None = None,
        then: Then | None = None,
        block: Block = False,
        keys: bool = False,
        traces: bool = False,
        until: float | None = None,
        check_s: float | None = None,
    ) -> list[Job]:
        """GET (GETB with block=True, GETBE with "until_empty"); [] on `404 Queue Empty`.

        A blocking get waits as long as it takes (no timeout_s); cancel the task to stop.
        `check_s`: the waited-on server's check, as the blocking client's (follow.py
        WAIT_CHECK_S): a frozen primary is left for the primary found anew.
        """
        return await self._run(ops.get(self, queues, count=count, expire_s=expire_s, then=then,
                                       block=block, keys=keys, traces=traces,
                                       until=until, check_s=check_s))

    # The API of queue_server/client/operations.py, each operation a coroutine (get above:
    # no wake_fd, a task is cancelled instead).
    put = _awaiting(ops.put)
    put_job = _awaiting(ops.put_job)
    put_many = _awaiting(ops.put_many)
    done = _awaiting(ops.done)
    later = _awaiting(ops.later)
    call = _awaiting(ops.call)
    fail = _awaiting(ops.fail)
    fail_many = _awaiting(fail_ops.fail_many)
    touch = _awaiting(ops.touch)
    job = _awaiting(ops.job)
    jobs = _awaiting(ops.jobs)
    search_jobs = _awaiting(ops.search_jobs)
    retry = _awaiting(ops.retry)
    retry_all = _awaiting(ops.retry_all)
    delete = _awaiting(ops.delete)
    delete_all_dead = _awaiting(ops.delete_all_dead)
    cancel = _awaiting(ops.cancel)
    cancelled = _awaiting(cancel_ops.cancelled)
    done_with_result = _awaiting(result_ops.done_with_result)
    done_large = _awaiting(result_ops.done_large)
    finished = _awaiting(result_ops.finished)
    result = _awaiting(result_ops.result)
    stats = _awaiting(ops.stats)
    stats_of = _awaiting(ops.stats_of)
    stats_top = _awaiting(ops.stats_top)
    stats_latency = _awaiting(ops.stats_latency)
    total = _awaiting(ops.total)
    runlist = _awaiting(ops.runlist)
    interconnect = _awaiting(ops.interconnect)
    ping = _awaiting(ops.ping)
