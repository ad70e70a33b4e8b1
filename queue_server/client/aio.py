"""asyncio queue server client: the API of QueueClient with coroutines, over asyncio streams.

Reconnects follow the rule in queue_server/client/sync.py. Requests of one client are
serialized by a lock, so tasks may share a client; a task cancelled mid-request
closes the connection (its reply, when it comes, would answer the next request).
"""
from __future__ import annotations

import asyncio
import select
import time
from collections.abc import Iterable, Sequence
from functools import cached_property
from types import TracebackType
from typing import Final, Self, TypeVar

from queue_server.client import calls
from queue_server.client.core import (
    CLIENT_TIMEOUT,
    RECV_BYTES,
    ClientCore,
    PutMany,
    backoff_s,
    lost_while_connecting,
    unreachable_reason,
)
from queue_server.protocol import job_requests as jreq
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import BadReply, ReplyTimeout
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

_DEFAULT: Final = CLIENT_TIMEOUT


class _Connection:
    """One stream pair, its unparsed bytes and its read loop."""

    __slots__ = ("_poll", "_timeout_s", "address", "reader", "replies", "server_id", "writer")

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
        self.replies = ReplyBuffer()
        self._timeout_s = timeout_s
        # The loop may not have seen the server's FIN yet when the next request
        # starts: asking the socket itself keeps the "nothing sent yet" check exact.
        self._poll = select.poll()
        self._poll.register(writer.get_extra_info("socket").fileno(), select.POLLIN)

    def unusable(self) -> bool:
        """True when the server closed the connection or sent bytes nobody asked for."""
        return (
            bool(self.replies.pending)
            or self.reader.at_eof()
            or self.reader.exception() is not None
            or self.writer.is_closing()
            or bool(self._poll.poll(0))
        )

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        if self.writer.transport.get_write_buffer_size():
            await self.writer.drain()

    async def request(self, data: bytes, parse: Parser[T], timeout_s: float | None = _DEFAULT) -> T:
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

    def close(self) -> None:
        self.writer.close()


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

    async def put(
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
        result = await self.put_job(queue, data, priority=priority, item=item, delay_s=delay_s,
                                    key=key, ttl_s=ttl_s)
        return result.key

    async def put_many(
        self, queue: str, datas: Iterable[bytes | str], *, priority: int = 0
    ) -> int:
        """PUT every item of `datas`, pipelined; returns how many the server acknowledged.

        All replies are read even when some are errors; the first error is then raised
        (the PUTs acknowledged before and after it are stored).
        """
        batch = PutMany(queue, datas, priority=priority)
        if not batch.total:
            return 0
        async with self._lock:
            conn = await self._ready()
            try:
                for data, replies in batch.steps():
                    if data:
                        await conn.send(data)
                    for _ in range(replies):
                        batch.add(await conn.read(parse_put_outcome))
            except BaseException as exc:
                self._drop()  # replies of the rest are still on the way
                self._raise_failed(conn, batch.what(), exc)
        return batch.result()

    async def get(
        self,
        queues: str | Sequence[str] | None = None,
        *,
        count: int | None = None,
        expire_s: float | None = None,
        then: Then | None = None,
        block: Block = False,
        keys: bool = False,
    ) -> list[Job]:
        """GET (GETB with block=True, GETBE with "until_empty"); [] on `404 Queue Empty`.

        A blocking get waits as long as it takes (no timeout_s); cancel the task to stop.
        """
        request = req.get_request(queues, count=count, expire_s=expire_s, then=then, block=block,
                                  keys=keys)
        return await self._request(request, parse_get, None if block else _DEFAULT)

    async def done(self, *ids: int) -> list[DoneResult]:
        """DONE for each id in one request; one DoneResult per id, in order."""
        return await self._request(req.done_request(ids), done_parser(len(ids)))

    async def later(self, *ids: int, delay_s: float | None = None) -> list[bool]:
        """LATER for each id in one request; per id, whether it was running."""
        request = req.later_request(ids, delay_s=delay_s)
        return await self._request(request, later_parser(len(ids)))

    async def call(
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

        As QueueClient.call: the reply comes from `output_queue` (default `<queue>_reply`)
        already acknowledged (EXPIRE 0 THEN DONE unless expire_s/then are given); after
        `timeout_s` ReplyTimeout, and the connection stays open unread for `late_reply_s`
        so a late reply is deleted too.
        """
        request = calls.call_request(queue, data, output_queue=output_queue, priority=priority,
                                     expire_s=expire_s, then=then)
        async with self._lock:
            conn = await self._ready()
            try:
                await conn.request(request, parse_wait_ack)
            except BaseException as exc:
                self._raise_failed(conn, "PUT ... WAIT", exc)
            try:
                return await conn.read(parse_job, timeout_s)
            except TimeoutError:
                # Still waiting in the server: keep it so a late reply is handed out (and deleted).
                self._conn = None
                asyncio.get_running_loop().call_later(late_reply_s, conn.close)
                server = req.format_address(conn.address)
                raise ReplyTimeout(f"no reply to PUT ... WAIT from {server} within {timeout_s} s; "
                                   f"a reply within {late_reply_s:.0f} s more is deleted") from None
            except BaseException as exc:  # a late output job would be read as the next reply
                self._raise_failed(conn, "PUT ... WAIT", exc)

    async def put_job(
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
        return await self._request(request, parse_put_keyed)

    async def fail(
        self, job_id: int, error: str | bytes, *, delay_s: float | None = None,
        dead: bool = False, solo: bool = False,
    ) -> FailResult:
        """FAIL a running job with its error: retried after its backoff (or `delay_s`), or
        dead (`dead=True`, or its queue's max_attempts used up). `solo`: hand it out alone."""
        request = jreq.fail_request(job_id, error, delay_s=delay_s, dead=dead, solo=solo)
        return await self._request(request, parse_fail)

    async def touch(self, *ids: int, expire_s: float | None = None) -> list[bool]:
        """TOUCH: renew the locks of running jobs; per id, whether it was running."""
        return await self._request(jreq.touch_request(ids, expire_s=expire_s), found_parser(len(ids)))

    async def job(self, key: str) -> JobInfo | None:
        """JOB: where the job with `key` is; None when no job has it."""
        return await self._request(jreq.job_request(key), parse_job_info, read_only=True)

    async def jobs(self, queue: str, state: str, *, limit: int = 100, after: str | None = None) -> list[JobInfo]:
        """JOBS: up to `limit` jobs of `queue` in `state`, after the job `after` (paging)."""
        request = jreq.jobs_request(queue, state, limit=limit, after=after)
        return await self._request(request, parse_jobs, read_only=True)

    async def retry(self, queue: str, *keys: str) -> list[bool]:
        """RETRY: dead jobs back to ready (attempts reset), failed ones ready now; per key, found."""
        return await self._request(jreq.retry_request(queue, keys), found_parser(len(keys)))

    async def retry_all(self, queue: str, state: str = "dead") -> int:
        """RETRY <q> ALL DEAD|FAILED: how many jobs became ready."""
        return await self._request(jreq.retry_all_request(queue, state), parse_count)

    async def delete(self, queue: str, *keys: str) -> list[str]:
        """DELETE: per key "ok", "not_found" or "running" (running jobs are not deleted)."""
        return await self._request(jreq.delete_request(queue, keys), delete_parser(len(keys)))

    async def delete_all_dead(self, queue: str) -> int:
        """DELETE <q> ALL DEAD: how many dead jobs were deleted."""
        return await self._request(jreq.delete_all_dead_request(queue), parse_count)

    async def stats(self, queue: str | None = None) -> dict[str, QueueStats]:
        """STATS [q]: queue name -> its counters."""
        request = req.named_request(b"STATS", queue)
        return await self._request(request, parse_stats, read_only=True)

    async def total(self, queue: str | None = None) -> Total:
        """TOTAL [q]."""
        request = req.named_request(b"TOTAL", queue)
        return await self._request(request, parse_total, read_only=True)

    async def runlist(self, *, with_data: bool = False) -> list[RunningJob]:
        """RUNLIST [DATA]: the running jobs."""
        parse = runlist_parser(with_data=with_data)
        request = req.runlist_request(with_data=with_data)
        return await self._request(request, parse, read_only=True)

    async def interconnect(self) -> int | None:
        """INTERCONNECT: the id of the server in use (None if it answers with an error)."""
        return await self._request(req.INTERCONNECT, parse_server_id, read_only=True)

    async def ping(self) -> None:
        """PING; raises when the server does not answer `200 PONG`."""
        text = await self._request(req.PING, parse_ok, read_only=True)
        if text != "PONG":
            raise BadReply(f"unexpected reply to PING: {text!r}")

    async def _request(
        self,
        request: bytes,
        parse: Parser[T],
        timeout_s: float | None = _DEFAULT,
        *,
        read_only: bool = False,
    ) -> T:
        async with self._lock:
            conn = await self._ready()
            retries = self.reconnect_attempts if read_only else 0
            offline_since: float | None = None
            while True:
                try:
                    return await conn.request(request, parse, timeout_s)
                except BaseException as exc:  # cancelled: a late reply would answer the next request
                    pause, offline_since = self._offline_pause(exc, offline_since, time.monotonic())
                    if pause is None:
                        self._retry_or_raise(conn, req.verb_of(request), exc, retries_left=retries)
                        retries -= 1
                    else:
                        await asyncio.sleep(pause)
                conn = await self._ready()

    async def _ready(self) -> _Connection:
        """The connection to use now: the current one if the server has not closed it."""
        conn = self._conn
        if conn is not None and not conn.unusable():
            return conn
        self._drop()
        self._conn = conn = await self._connect()
        return conn

    async def _connect(self) -> _Connection:
        errors: dict[Address, str] = {}
        for attempt in range(self.reconnect_attempts + 1):
            if attempt:
                await asyncio.sleep(backoff_s(attempt))
            conn = await self._open_primary(errors)
            if conn is not None:
                return conn
        self._raise_unreachable(errors)

    async def _open_primary(self, errors: dict[Address, str]) -> _Connection | None:
        """Connect to every server, keep the one with the lowest id."""
        if len(self.addresses) == 1:
            return await self._open(self.addresses[0], errors, ask_id=False)
        reachable: list[_Connection] = []
        try:
            for address in self.addresses:
                conn = await self._open(address, errors, ask_id=True)
                if conn is not None:
                    reachable.append(conn)
        except BaseException:
            self._close_all(reachable)
            raise
        return self._keep_primary(reachable)

    async def _open(
        self, address: Address, errors: dict[Address, str], *, ask_id: bool
    ) -> _Connection | None:
        """A connected, authenticated connection; None (reason in `errors`) when unreachable."""
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                reader, writer = await asyncio.open_connection(*address, limit=RECV_BYTES)
        except OSError as exc:  # TimeoutError included
            errors[address] = unreachable_reason(exc)
            return None
        conn = _Connection(reader, writer, address, self.timeout_s)
        try:
            if self._auth is not None:
                await conn.request(self._auth, parse_ok)
            if ask_id:
                conn.server_id = await conn.request(req.INTERCONNECT, parse_server_id)
        except (OSError, EOFError) as exc:
            conn.close()
            errors[address] = lost_while_connecting(exc)
            return None
        except BaseException:
            conn.close()
            raise
        return conn
