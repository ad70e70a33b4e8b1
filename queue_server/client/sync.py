"""Blocking queue server client: performs the effects of the shared operations
(queue_server/client/operations.py) on one socket, by blocking; the reconnect rule is
queue_server/client/core.py's.

Not thread-safe: use one client per thread.
"""
from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable
from functools import cached_property
from types import TracebackType
from typing import Any, Concatenate, Final, ParamSpec, Self, TypeVar

from queue_server.client import calls
from queue_server.client import cancels as cancel_ops
from queue_server.client import fails as fail_ops
from queue_server.client import operations as ops
from queue_server.client import results as result_ops
from queue_server.client.core import CLIENT_TIMEOUT, RECV_BYTES, ClientCore
from queue_server.client.effects import (
    Effect,
    HalfClose,
    Op,
    Open,
    Read,
    Request,
    Send,
    Sleep,
    drive,
)
from queue_server.protocol.client_errors import WaitWoken
from queue_server.protocol.reply_reading import NEED_MORE, Parser, ReplyBuffer
from queue_server.protocol.requests import Address

T = TypeVar("T")
P = ParamSpec("P")

_DEFAULT: Final = CLIENT_TIMEOUT


class _Connection:
    """One socket, its unparsed bytes and its read loop."""

    __slots__ = ("_poll", "_timeout_s", "_view", "address", "half_closed", "replies", "server_id", "serving",
                 "sock")

    def __init__(self, sock: socket.socket, address: Address, view: memoryview, timeout_s: float):
        self.sock = sock
        self.address = address
        self.server_id: int | None = None
        self.serving: bool | None = None
        self.replies = ReplyBuffer()
        self._view = view
        self._timeout_s = timeout_s
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        # After a wait given up (HalfClose): the server closes it, nothing more goes on it.
        self.half_closed = False

    def unusable(self) -> bool:
        """True when the server closed the connection or sent bytes nobody asked for."""
        if self.replies.pending or self.half_closed:
            return True
        return bool(self._poll.poll(0))

    def read(self, parse: Parser[T], timeout_s: float | None = _DEFAULT,
             wake_fd: int | None = None) -> T:
        """The next reply; `timeout_s` None waits forever, default is the client's timeout;
        TimeoutError past it (what was read is kept for the next read).

        With `wake_fd`, the wait also ends (WaitWoken, the connection as it was) when that
        fd is readable first: queue_server/client/wait_check.py gives the wait up."""
        replies = self.replies
        if replies.pending:
            value = replies.take(parse)
            if value is not NEED_MORE:
                return value
        if timeout_s == _DEFAULT and wake_fd is None:
            return self._read_more(parse)
        if timeout_s == _DEFAULT:
            timeout_s = self._timeout_s
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while True:
                remaining_s = None if deadline is None else deadline - time.monotonic()
                if remaining_s is not None and remaining_s <= 0:
                    raise TimeoutError("reply deadline passed")
                if wake_fd is not None:
                    self._readable(wake_fd, remaining_s)
                self.sock.settimeout(remaining_s)
                self._recv()
                value = replies.take(parse)
                if value is not NEED_MORE:
                    return value
        finally:
            self.sock.settimeout(self._timeout_s)

    def _read_more(self, parse: Parser[T]) -> T:
        while True:
            self._recv()
            value = self.replies.take(parse)
            if value is not NEED_MORE:
                return value

    def _readable(self, wake_fd: int, timeout_s: float | None) -> None:
        """Return when the socket is readable; WaitWoken when only `wake_fd` is, TimeoutError
        when neither is within `timeout_s`."""
        poll = select.poll()
        poll.register(self.sock, select.POLLIN)
        poll.register(wake_fd, select.POLLIN)
        ready = {fd for fd, _ in poll.poll(None if timeout_s is None else timeout_s * 1000)}
        if not ready:
            raise TimeoutError("reply deadline passed")
        if self.sock.fileno() not in ready:
            raise WaitWoken()

    def half_close(self) -> None:
        """HalfClose: the server drops the waiter and closes; nothing more goes on it."""
        self.half_closed = True
        self.sock.shutdown(socket.SHUT_WR)

    def _recv(self) -> None:
        count = self.sock.recv_into(self._view)
        if not count:
            raise EOFError("the server closed the connection")
        self.replies.feed(self._view[:count])

    def close(self) -> None:
        self.sock.close()


def _sleep(seconds: float, wake_fd: int | None) -> None:
    """time.sleep, or a poll that raises WaitWoken when `wake_fd` is readable first."""
    if wake_fd is None:
        time.sleep(seconds)
        return
    poll = select.poll()
    poll.register(wake_fd, select.POLLIN)
    if poll.poll(max(0, int(seconds * 1000))):
        raise WaitWoken()


def _blocking(op: Callable[Concatenate[ops.Client, P], Op[T]]) -> Callable[Concatenate[QueueClient, P], T]:
    """The method that runs `op` to its end, blocking."""

    def method(self: QueueClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(op(self, *args, **kwargs))

    return ops.as_method(method, op)


class QueueClient(ClientCore[_Connection]):
    """A blocking client of the queue server (PROTOCOL.md); see queue_server/client/core.py
    for reconnects."""

    @cached_property
    def _view(self) -> memoryview:
        # One receive buffer for all connections of the client, made on the first connect.
        return memoryview(bytearray(RECV_BYTES))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._drop()
        for conn in self._abandoned.take_all():
            conn.close()

    def _run(self, op: Op[T]) -> T:
        return drive(op, self._perform)

    def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, Request):
            effect.conn.sock.sendall(effect.data)
            return effect.conn.read(effect.parse, effect.timeout_s)
        if isinstance(effect, Read):
            return effect.conn.read(effect.parse, effect.timeout_s, effect.wake_fd)
        if isinstance(effect, Send):
            return effect.conn.sock.sendall(effect.data)
        if isinstance(effect, Sleep):
            return _sleep(effect.seconds, effect.wake_fd)
        if isinstance(effect, HalfClose):
            return effect.conn.half_close()
        return self._open_socket(effect)

    def _open_socket(self, effect: Open) -> _Connection:
        sock = socket.create_connection(effect.address, timeout=self.connect_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.settimeout(self.timeout_s)
        return _Connection(sock, effect.address, self._view, self.timeout_s)

    @cached_property
    def _abandoned(self) -> calls.AbandonedWaits[_Connection]:
        return calls.AbandonedWaits()

    def _keep_for_late_reply(self, conn: _Connection, late_reply_s: float) -> None:
        # Nothing runs between calls: the next call (or close) closes it.
        for pushed in self._abandoned.add(conn, until=time.monotonic() + late_reply_s):
            pushed.close()

    def _close_answered_waits(self) -> None:
        """Close the given-up waits that got their reply (or closed, or ran out of time)."""
        waits = self._abandoned
        if waits:
            answered = {id(conn) for conn in waits.conns() if conn.unusable()}
            for conn in waits.due(time.monotonic(), answered):
                conn.close()

    # The API of queue_server/client/operations.py, each operation run to its end.
    put = _blocking(ops.put)
    put_job = _blocking(ops.put_job)
    put_many = _blocking(ops.put_many)
    get = _blocking(ops.get)
    done = _blocking(ops.done)
    later = _blocking(ops.later)
    call = _blocking(ops.call)
    fail = _blocking(ops.fail)
    fail_many = _blocking(fail_ops.fail_many)
    touch = _blocking(ops.touch)
    job = _blocking(ops.job)
    jobs = _blocking(ops.jobs)
    search_jobs = _blocking(ops.search_jobs)
    retry = _blocking(ops.retry)
    retry_all = _blocking(ops.retry_all)
    delete = _blocking(ops.delete)
    delete_all_dead = _blocking(ops.delete_all_dead)
    cancel = _blocking(ops.cancel)
    cancelled = _blocking(cancel_ops.cancelled)
    done_with_result = _blocking(result_ops.done_with_result)
    done_large = _blocking(result_ops.done_large)
    finished = _blocking(result_ops.finished)
    result = _blocking(result_ops.result)
    stats = _blocking(ops.stats)
    stats_of = _blocking(ops.stats_of)
    stats_top = _blocking(ops.stats_top)
    stats_latency = _blocking(ops.stats_latency)
    total = _blocking(ops.total)
    runlist = _blocking(ops.runlist)
    interconnect = _blocking(ops.interconnect)
    ping = _blocking(ops.ping)
