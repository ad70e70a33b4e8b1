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

from queue_server.client import calls
from queue_server.client.core import (
    CLIENT_TIMEOUT,
    ClientCore,
    PutMany,
    lost_while_connecting,
    unreachable_reason,
)
from queue_server.client.core import PUT_MANY_CHUNK as PUT_MANY_CHUNK
from queue_server.client.core import RECV_BYTES as RECV_BYTES
from queue_server.client.core import backoff_s as backoff_s
from queue_server.protocol import job_requests as jreq
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import BadReply, QueueServerError, ReplyTimeout, WaitWoken
from queue_server.protocol.job_info import FailResult, JobInfo, PutResult
from queue_server.protocol.job_replies import (
    delete_parser,
    found_parser,
    parse_count,
    parse_fail,
    parse_job_info,
    parse_jobs,
    parse_put_keyed,
)
from queue_server.protocol.replies import (
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
    parse_put_outcome,
    parse_server_id,
    parse_stats,
    parse_total,
    parse_wait_ack,
    runlist_parser,
)
from queue_server.protocol.requests import Address, Block, Then

T = TypeVar("T")

_FOREVER: Final = None
NOT_FOUND: Final = 404
_DEFAULT: Final = CLIENT_TIMEOUT


class _Connection:
    """One socket, its unparsed bytes and its read loop."""

    __slots__ = ("_poll", "_timeout_s", "_view", "address", "half_closed", "replies", "server_id",
                 "sock")

    def __init__(self, sock: socket.socket, address: Address, view: memoryview, timeout_s: float):
        self.sock = sock
        self.address = address
        self.server_id: int | None = None
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

    def request(self, data: bytes, parse: Parser[T], timeout_s: float | None = _DEFAULT,
                wake_fd: int | None = None) -> T:
        self.sock.sendall(data)
        return self.read(parse, timeout_s, wake_fd)

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

    def _last_reply(self, parse: Parser[T]) -> T:
        """After a wake: half-close, so the server drops the waiter and closes, and read to
        the end. The server answers a waiter or sees the EOF, in that order on one loop, so
        a reply it sent first is read here, not lost; WaitWoken when none came."""
        self.half_closed = True
        self.sock.shutdown(socket.SHUT_WR)
        self.sock.settimeout(self._timeout_s)
        while True:
            try:
                self._recv()
            except EOFError:
                raise WaitWoken() from None
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
        for conn in self._abandoned.take_all():
            conn.close()

    def put(
        self,
        queue: str,
        data: bytes | str,
        *,
        priority: int = 0,
        item: str | None = None,
        delay_s: float | None = None,
        key: str | None = None,
        ttl_s: float | None = None,
    ) -> str:
        """Add a job; returns its key (the server's `_<n>`, or `key`). A `key` that a waiting
        or running job holds adds nothing (unique jobs): put_job() says so. For a new
        item's name (new_item=True) use put_job(...).item. With `ttl_s` the server deletes
        the job if it is not handed out within ttl_s of becoming ready (TTL)."""
        result = self.put_job(queue, data, priority=priority, item=item, delay_s=delay_s,
                              key=key, ttl_s=ttl_s)
        return result.key

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
        keys: bool = False,
        wake_fd: int | None = None,
    ) -> list[Job]:
        """GET (GETB with block=True, GETBE with "until_empty"); [] on `404 Queue Empty`.

        A blocking get waits as long as it takes (no timeout_s), or until `wake_fd` is
        readable: then it raises WaitWoken with the connection closed (no job lost).
        """
        request = req.get_request(queues, count=count, expire_s=expire_s, then=then, block=block,
                                  keys=keys)
        return self._request(request, parse_get, _FOREVER if block else _DEFAULT, wake_fd=wake_fd)

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
        output_queue: str | None = None,
        priority: int = 0,
        timeout_s: float | None = None,
        expire_s: float | None = None,
        then: Then | None = None,
        late_reply_s: float = calls.LATE_REPLY_S,
    ) -> Job:
        """Put a job under a new item and wait for its handler's reply (PUT ... NEW WAIT).

        The reply comes from `output_queue`, by default `<queue>_reply`, where handlers
        reply (`job.reply(...)`). It is already acknowledged: handed out with EXPIRE 0 THEN
        DONE, the server deletes it (give expire_s/then to hold it running and DONE it
        yourself). After `timeout_s` ReplyTimeout is raised; the connection stays open
        unread for `late_reply_s`, so a late reply is deleted too (queue_server/client/calls.py).
        """
        request = calls.call_request(queue, data, output_queue=output_queue, priority=priority,
                                     expire_s=expire_s, then=then)
        self._close_answered_waits()
        conn = self._ready()
        try:
            conn.request(request, parse_wait_ack)
        except BaseException as exc:
            self._raise_failed(conn, "PUT ... WAIT", exc)
        try:
            return conn.read(parse_job, timeout_s)
        except TimeoutError:
            # Still waiting in the server: keep it so a late reply is handed out (and deleted).
            self._conn = None
            for pushed in self._abandoned.add(conn, until=time.monotonic() + late_reply_s):
                pushed.close()
            server = req.format_address(conn.address)
            raise ReplyTimeout(f"no reply to PUT ... WAIT from {server} within {timeout_s} s; "
                               f"a reply within {late_reply_s:.0f} s more is deleted") from None
        except BaseException as exc:  # a late output job would be read as the next reply
            self._raise_failed(conn, "PUT ... WAIT", exc)

    @cached_property
    def _abandoned(self) -> calls.AbandonedWaits[_Connection]:
        return calls.AbandonedWaits()

    def _close_answered_waits(self) -> None:
        """Close the given-up waits that got their reply (or closed, or ran out of time)."""
        waits = self._abandoned
        if waits:
            answered = {id(conn) for conn in waits.conns() if conn.unusable()}
            for conn in waits.due(time.monotonic(), answered):
                conn.close()

    def put_job(
        self,
        queue: str,
        data: bytes | str,
        *,
        priority: int = 0,
        item: str | None = None,
        new_item: bool = False,
        delay_s: float | None = None,
        key: str | None = None,
        ttl_s: float | None = None,
    ) -> PutResult:
        """PUT ... KEY: the job's key (the server's with key=None), its item with
        `new_item=True`, and `existing_state` when `key` was taken (unique job: nothing added)."""
        request = req.put_request(queue, data, priority_=priority, item=item, new_item=new_item,
                                  delay_s=delay_s, keyed=True, key_=key, ttl_s=ttl_s)
        return self._request(request, parse_put_keyed)

    def fail(
        self, job_id: int, error: str | bytes, *, delay_s: float | None = None,
        dead: bool = False, solo: bool = False,
    ) -> FailResult:
        """FAIL a running job with its error: retried after its backoff (or `delay_s`), or
        dead (`dead=True`, or its queue's max_attempts used up). `solo`: hand it out alone."""
        request = jreq.fail_request(job_id, error, delay_s=delay_s, dead=dead, solo=solo)
        return self._request(request, parse_fail)

    def fail_many(self, failures: Sequence[jreq.FailRequest]) -> list[FailResult | None]:
        """FAIL several running jobs in one round trip (the requests pipelined); per job its
        FailResult, or None when it was not running (`404 Job Not Found`). Every reply is read
        before another error reply is raised, so the connection stays in step."""
        if not failures:
            return []
        data = b"".join(
            jreq.fail_request(f.id, f.error, delay_s=f.delay_s, dead=f.dead, solo=f.solo)
            for f in failures
        )
        conn = self._ready()
        results: list[FailResult | None] = []
        refused: QueueServerError | None = None
        try:
            conn.sock.sendall(data)
            for _ in failures:
                try:
                    results.append(conn.read(parse_fail))
                except QueueServerError as exc:
                    if isinstance(exc, BadReply):
                        raise
                    refused = refused or (None if exc.code == NOT_FOUND else exc)
                    results.append(None)
        except BaseException as exc:  # interrupted: a late reply would answer the next request
            self._drop()
            self._raise_failed(conn, "FAIL", exc)
        if refused is not None:
            raise refused
        return results

    def touch(self, *ids: int, expire_s: float | None = None) -> list[bool]:
        """TOUCH: renew the locks of running jobs; per id, whether it was running."""
        return self._request(jreq.touch_request(ids, expire_s=expire_s), found_parser(len(ids)))

    def job(self, key: str) -> JobInfo | None:
        """JOB: where the job with `key` is; None when no job has it."""
        return self._request(jreq.job_request(key), parse_job_info, read_only=True)

    def jobs(self, queue: str, state: str, *, limit: int = 100, after: str | None = None) -> list[JobInfo]:
        """JOBS: up to `limit` jobs of `queue` in `state`, after the job `after` (paging)."""
        request = jreq.jobs_request(queue, state, limit=limit, after=after)
        return self._request(request, parse_jobs, read_only=True)

    def retry(self, queue: str, *keys: str) -> list[bool]:
        """RETRY: dead jobs back to ready (attempts reset), failed ones ready now; per key, found."""
        return self._request(jreq.retry_request(queue, keys), found_parser(len(keys)))

    def retry_all(self, queue: str, state: str = "dead") -> int:
        """RETRY <q> ALL DEAD|FAILED: how many jobs became ready."""
        return self._request(jreq.retry_all_request(queue, state), parse_count)

    def delete(self, queue: str, *keys: str) -> list[str]:
        """DELETE: per key "ok", "not_found" or "running" (running jobs are not deleted)."""
        return self._request(jreq.delete_request(queue, keys), delete_parser(len(keys)))

    def delete_all_dead(self, queue: str) -> int:
        """DELETE <q> ALL DEAD: how many dead jobs were deleted."""
        return self._request(jreq.delete_all_dead_request(queue), parse_count)

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
        wake_fd: int | None = None,
    ) -> T:
        conn = self._ready()
        retries = self.reconnect_attempts if read_only else 0
        offline_since: float | None = None
        while True:
            try:
                return conn.request(request, parse, timeout_s, wake_fd)
            except WaitWoken:
                self._drop()  # the server drops the waiter with the connection
                raise
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
