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

from queue_server.client import calls, wait_check
from queue_server.client import cancels as cancel_ops
from queue_server.client import fails as fail_ops
from queue_server.client import operations as ops
from queue_server.client import results as result_ops
from queue_server.client.core import CLIENT_TIMEOUT, RECV_BYTES, ClientCore
from queue_server.client.effects import Effect, Op, Open, Read, Request, Send, Sleep, drive
from queue_server.client.follow import WAIT_TAIL_S
from queue_server.protocol.client_errors import WaitWoken
from queue_server.protocol.reply_reading import NEED_MORE, Parser, ReplyBuffer
from queue_server.protocol.requests import Address

T = TypeVar("T")
P = ParamSpec("P")

_DEFAULT: Final = CLIENT_TIMEOUT
GIVEN_UP: Final = "the server left a PING on a new connection unanswered: the wait was given up"


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
        # After a woken wait (see _last_reply): the server closes it, nothing more goes on it.
        self.half_closed = False

    def unusable(self) -> bool:
        """True when the server closed the connection or sent bytes nobody asked for."""
        if self.replies.pending or self.half_closed:
            return True
        return bool(self._poll.poll(0))

    def read(self, parse: Parser[T], timeout_s: float | None = _DEFAULT,
             wake_fd: int | None = None) -> T:
        """The next reply; `timeout_s` None waits forever, default is the client's timeout.

        With `wake_fd`, the wait also ends (WaitWoken) when that fd is readable first."""
        replies = self.replies
        if replies.pending:
            value = replies.take(parse)
            if value is not NEED_MORE:
                return value
        if timeout_s == _DEFAULT:
            return self._read_more(parse)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while True:
                if deadline is not None:
                    remaining_s = deadline - time.monotonic()
                    if remaining_s <= 0:
                        raise TimeoutError("reply deadline passed")
                    self.sock.settimeout(remaining_s)
                else:
                    self.sock.settimeout(None)
                if wake_fd is not None and self._woken(wake_fd):
                    return self._last_reply(parse)
                self._recv()
                value = replies.take(parse)
                if value is not NEED_MORE:
                    return value
        finally:
            self.sock.settimeout(self._timeout_s)

    def wait(self, parse: Parser[T], wake_fd: int | None, check_s: float,
             answers: Callable[[], bool]) -> T:
        """A blocking wait's reply, as read() without a timeout, but every `check_s` with no
        byte come `answers()` is asked whether the server still answers on a new connection
        (follow.py WAIT_CHECK_S); when it does not, the wait is given up as a wake gives it
        up, and what the server had sent is read within WAIT_TAIL_S: a reply, else the
        EOFError of a lost connection (the request follows the primary, core.py)."""
        replies = self.replies
        if replies.pending:
            value = replies.take(parse)
            if value is not NEED_MORE:
                return value
        poll = select.poll()
        poll.register(self.sock, select.POLLIN)
        if wake_fd is not None:
            poll.register(wake_fd, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poll.poll(check_s * 1000)}
            if not ready:
                if answers():
                    continue
                return self._last_reply(parse, WAIT_TAIL_S, given_up=True)
            if self.sock.fileno() not in ready:
                return self._last_reply(parse)
            self._recv()
            value = replies.take(parse)
            if value is not NEED_MORE:
                return value

    def _read_more(self, parse: Parser[T]) -> T:
        while True:
            self._recv()
            value = self.replies.take(parse)
            if value is not NEED_MORE:
                return value

    def _woken(self, wake_fd: int) -> bool:
        """Wait until the socket or `wake_fd` is readable; True when only `wake_fd` is."""
        poll = select.poll()
        poll.register(self.sock, select.POLLIN)
        poll.register(wake_fd, select.POLLIN)
        ready = {fd for fd, _ in poll.poll()}
        return self.sock.fileno() not in ready

    def _last_reply(self, parse: Parser[T], tail_s: float | None = None, *,
                    given_up: bool = False) -> T:
        """After a wake: half-close, so the server drops the waiter and closes, and read to
        the end. The server answers a waiter or sees the EOF, in that order on one loop, so
        a reply it sent first is read here, not lost; WaitWoken when none came. A wait
        `given_up` (its server did not answer, wait()) reads for `tail_s` at most, and its
        EOF is a lost connection's: the request goes to the primary found anew."""
        self.half_closed = True
        self.sock.shutdown(socket.SHUT_WR)
        self.sock.settimeout(self._timeout_s if tail_s is None else tail_s)
        while True:
            try:
                self._recv()
            except EOFError:
                if given_up:
                    raise EOFError(GIVEN_UP) from None
                raise WaitWoken() from None
            except TimeoutError:
                if given_up:  # silent, as it was to the PING
                    raise EOFError(GIVEN_UP) from None
                raise
            value = self.replies.take(parse)
            if value is not NEED_MORE:
                return value

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
            if effect.check_s is not None:
                address = effect.conn.address
                return effect.conn.wait(effect.parse, effect.wake_fd, effect.check_s,
                                        lambda: self._run(wait_check.answers(
                                            address, auth=self._auth, timeout_s=self.connect_timeout_s)))
            return effect.conn.read(effect.parse, effect.timeout_s, effect.wake_fd)
        if isinstance(effect, Read):
            return effect.conn.read(effect.parse, effect.timeout_s, effect.wake_fd)
        if isinstance(effect, Send):
            return effect.conn.sock.sendall(effect.data)
        if isinstance(effect, Sleep):
            return _sleep(effect.seconds, effect.wake_fd)
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
