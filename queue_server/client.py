"""Blocking queue server client: one socket to the primary, failover down the server list.

Reconnect rule (the same in AsyncQueueClient):
- Before each request the client checks that the server has not closed the
  connection meanwhile (it was killed, restarted, shut down). A closed or
  never-opened connection is replaced first: nothing of the request was sent,
  so any request goes on transparently to the primary found then.
- Connecting tries every server of the list; reachable ones are sent
  `AUTH <token>` (when a token is set) and asked INTERCONNECT for their id; the
  lowest id wins (list order breaks ties, a server without an id ranks last).
  With a single server no INTERCONNECT is sent. Unreachable servers are
  skipped; with none reachable it retries the list
  `reconnect_attempts` more times, then raises ServerUnreachable.
- Read-only requests (PING, TOTAL, STATS, RUNLIST) that lose the connection
  mid-way are repeated on a fresh connection.
- Requests that change state (PUT, GET*, DONE, LATER, call) that lose the
  connection after sending raise ConnectionLost: the server may have acted on
  them. The next call reconnects.
- A reply that does not come within `timeout_s` (or `call`'s own timeout)
  closes the connection and raises ReplyTimeout: a late reply would otherwise
  be read as the answer to the next request. Blocking GETs wait without limit.
- An error reply (QueueServerError) keeps the connection, except 413 and
  `400 Line Too Long`, after which the server closes it.
- With `offline_wait_s` > 0, a request refused with `500 Offline Mode` (not carried
  out) is tried again, the server list asked afresh each time, for up to that long:
  a replica that is not promoted yet, or a primary in maintenance, is waited out.

Not thread-safe: use one client per thread.
"""
from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterable, Sequence
from functools import cached_property
from types import TracebackType
from typing import Final, Self, TypeVar

from queue_server import client_requests as req
from queue_server.client_core import (
    CLIENT_TIMEOUT,
    ClientCore,
    PutMany,
    lost_while_connecting,
    unreachable_reason,
)
from queue_server.client_core import PUT_MANY_CHUNK as PUT_MANY_CHUNK
from queue_server.client_core import RECV_BYTES as RECV_BYTES
from queue_server.client_core import backoff_s as backoff_s
from queue_server.client_errors import BadReply
from queue_server.client_requests import Address, Block, Then
from queue_server.replies import (
    NEED_MORE,
    DoneResult,
    Job,
    Parser,
    QueueStats,
    ReplyBuffer,
    RunningJob,
    Total,
    done_parser,
    later_parser,
    parse_get,
    parse_job,
    parse_ok,
    parse_put,
    parse_put_outcome,
    parse_server_id,
    parse_stats,
    parse_total,
    parse_wait_ack,
    runlist_parser,
)

T = TypeVar("T")

_FOREVER: Final = None
_DEFAULT: Final = CLIENT_TIMEOUT


class _Connection:
    """One socket, its unparsed bytes and its read loop."""

    __slots__ = ("_poll", "_timeout_s", "_view", "address", "replies", "server_id", "sock")

    def __init__(self, sock: socket.socket, address: Address, view: memoryview, timeout_s: float):
        self.sock = sock
        self.address = address
        self.server_id: int | None = None
        self.replies = ReplyBuffer()
        self._view = view
        self._timeout_s = timeout_s
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)

    def unusable(self) -> bool:
        """True when the server closed the connection or sent bytes nobody asked for."""
        if self.replies.pending:
            return True
        return bool(self._poll.poll(0))

    def request(self, data: bytes, parse: Parser[T], timeout_s: float | None = _DEFAULT) -> T:
        self.sock.sendall(data)
        return self.read(parse, timeout_s)

    def read(self, parse: Parser[T], timeout_s: float | None = _DEFAULT) -> T:
        """The next reply; `timeout_s` None waits forever, default is the client's timeout."""
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

    def _recv(self) -> None:
        count = self.sock.recv_into(self._view)
        if not count:
            raise EOFError("the server closed the connection")
        self.replies.feed(self._view[:count])

    def close(self) -> None:
        self.sock.close()


class QueueClient(ClientCore[_Connection]):
    """A blocking client of the queue server (PROTOCOL.md); see the module doc for reconnects."""

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

    def put(
        self,
        queue: str,
        data: bytes | str,
        *,
        priority: int = 0,
        item: str | None = None,
        new_item: bool = False,
        delay_s: float | None = None,
    ) -> str | None:
        """Add a job; returns the new item's name with `new_item=True`, else None."""
        request = req.put_request(
            queue, data, priority_=priority, item=item, new_item=new_item, delay_s=delay_s
        )
        return self._request(request, parse_put)

    def put_many(
        self, queue: str, datas: Iterable[bytes | str], *, priority: int = 0
    ) -> int:
        """PUT every item of `datas`, pipelined; returns how many the server acknowledged.

        All replies are read even when some are errors; the first error is then raised
        (the PUTs acknowledged before and after it are stored).
        """
        batch = PutMany(queue, datas, priority=priority)
        if not batch.total:
            return 0
        conn = self._ready()
        try:
            for data, replies in batch.steps():
                if data:
                    conn.sock.sendall(data)
                for _ in range(replies):
                    batch.add(conn.read(parse_put_outcome))
        except BaseException as exc:
            self._drop()  # replies of the rest are still on the way
            self._raise_failed(conn, batch.what(), exc)
        return batch.result()

    def get(
        self,
        queues: str | Sequence[str] | None = None,
        *,
        count: int | None = None,
        expire_s: float | None = None,
        then: Then | None = None,
        block: Block = False,
    ) -> list[Job]:
        """GET (GETB with block=True, GETBE with "until_empty"); [] on `404 Queue Empty`.

        A blocking get waits as long as it takes (no timeout_s).
        """
        request = req.get_request(queues, count=count, expire_s=expire_s, then=then, block=block)
        return self._request(request, parse_get, _FOREVER if block else _DEFAULT)

    def done(self, *ids: int) -> list[DoneResult]:
        """DONE for each id in one request; one DoneResult per id, in order."""
        return self._request(req.done_request(ids), done_parser(len(ids)))

    def later(self, *ids: int, delay_s: float | None = None) -> list[bool]:
        """LATER for each id in one request; per id, whether it was running."""
        return self._request(req.later_request(ids, delay_s=delay_s), later_parser(len(ids)))

    def call(
        self,
        queue: str,
        data: bytes | str,
        *,
        output_queue: str,
        priority: int = 0,
        expire_s: float | None = None,
        then: Then | None = None,
        timeout_s: float | None = None,
    ) -> Job:
        """PUT ... NEW WAIT: put a job under a new item, wait for that item's job in `output_queue`.

        The returned output job is running: DONE it (or give expire_s with then="done").
        After `timeout_s` the connection is closed (the output job, when it comes,
        stays in `output_queue` for anyone) and ReplyTimeout is raised.
        """
        request = req.put_request(
            queue, data, priority_=priority, new_item=True, wait_queue=output_queue,
            expire_s=expire_s, then=then,
        )
        conn = self._ready()
        try:
            conn.request(request, parse_wait_ack)
            return conn.read(parse_job, timeout_s)
        except BaseException as exc:  # a late output job would be read as the next reply
            self._raise_failed(conn, "PUT ... WAIT", exc)

    def stats(self, queue: str | None = None) -> dict[str, QueueStats]:
        """STATS [q]: queue name -> its counters."""
        return self._request(req.named_request(b"STATS", queue), parse_stats, read_only=True)

    def total(self, queue: str | None = None) -> Total:
        """TOTAL [q]."""
        return self._request(req.named_request(b"TOTAL", queue), parse_total, read_only=True)

    def runlist(self, *, with_data: bool = False) -> list[RunningJob]:
        """RUNLIST [DATA]: the running jobs."""
        parse = runlist_parser(with_data=with_data)
        return self._request(req.runlist_request(with_data=with_data), parse, read_only=True)

    def interconnect(self) -> int | None:
        """INTERCONNECT: the id of the server in use (None if it answers with an error)."""
        return self._request(req.INTERCONNECT, parse_server_id, read_only=True)

    def ping(self) -> None:
        """PING; raises when the server does not answer `200 PONG`."""
        text = self._request(req.PING, parse_ok, read_only=True)
        if text != "PONG":
            raise BadReply(f"unexpected reply to PING: {text!r}")

    def _request(
        self,
        request: bytes,
        parse: Parser[T],
        timeout_s: float | None = _DEFAULT,
        *,
        read_only: bool = False,
    ) -> T:
        conn = self._ready()
        retries = self.reconnect_attempts if read_only else 0
        offline_since: float | None = None
        while True:
            try:
                return conn.request(request, parse, timeout_s)
            except BaseException as exc:  # interrupted: a late reply would answer the next request
                pause, offline_since = self._offline_pause(exc, offline_since, time.monotonic())
                if pause is None:
                    self._retry_or_raise(conn, req.verb_of(request), exc, retries_left=retries)
                    retries -= 1
                else:
                    time.sleep(pause)
            conn = self._ready()

    def _ready(self) -> _Connection:
        """The connection to use now: the current one if the server has not closed it."""
        conn = self._conn
        if conn is not None and not conn.unusable():
            return conn
        self._drop()
        self._conn = conn = self._connect()
        return conn

    def _connect(self) -> _Connection:
        errors: dict[Address, str] = {}
        for attempt in range(self.reconnect_attempts + 1):
            if attempt:
                time.sleep(backoff_s(attempt))
            conn = self._open_primary(errors)
            if conn is not None:
                return conn
        self._raise_unreachable(errors)

    def _open_primary(self, errors: dict[Address, str]) -> _Connection | None:
        """Connect to every server, keep the one with the lowest id."""
        if len(self.addresses) == 1:
            return self._open(self.addresses[0], errors, ask_id=False)
        reachable: list[_Connection] = []
        try:
            for address in self.addresses:
                conn = self._open(address, errors, ask_id=True)
                if conn is not None:
                    reachable.append(conn)
        except BaseException:
            self._close_all(reachable)
            raise
        return self._keep_primary(reachable)

    def _open(self, address: Address, errors: dict[Address, str], *, ask_id: bool) -> _Connection | None:
        """A connected, authenticated connection; None (reason in `errors`) when unreachable."""
        try:
            sock = socket.create_connection(address, timeout=self.connect_timeout_s)
        except OSError as exc:
            errors[address] = unreachable_reason(exc)
            return None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.settimeout(self.timeout_s)
        conn = _Connection(sock, address, self._view, self.timeout_s)
        try:
            if self._auth is not None:
                conn.request(self._auth, parse_ok)
            if ask_id:
                conn.server_id = conn.request(req.INTERCONNECT, parse_server_id)
        except (OSError, EOFError) as exc:
            conn.close()
            errors[address] = lost_while_connecting(exc)
            return None
        except BaseException:
            conn.close()
            raise
        return conn
