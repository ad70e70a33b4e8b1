"""The queue client's API, once: each operation encodes its request, yields the effects
(queue_server/client/effects.py) and decides what the replies mean.

QueueClient and AsyncQueueClient expose every operation here as a method of the same
name and signature (the blocking one returns the value, the asyncio one a coroutine);
see queue_server/client/core.py for the reconnect rule they all follow.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from functools import update_wrapper
from typing import Any, TypeAlias, TypeVar

from queue_server.client import calls
from queue_server.client.core import CLIENT_TIMEOUT, ClientCore
from queue_server.client.effects import Op, Read, Request, Send
from queue_server.client.put_many import PutMany
from queue_server.client.tracing import INSTALLED as TRACING
from queue_server.client.tracing import current_traceparent
from queue_server.protocol import job_requests as jreq
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import BadReply, QueueServerError
from queue_server.protocol.job_info import FailResult, JobInfo, PutResult
from queue_server.protocol.job_replies import (
    delete_parser,
    found_parser,
    parse_cancel,
    parse_count,
    parse_fail,
    parse_job_info,
    parse_jobs,
    parse_jobs_page,
    parse_put_keyed,
)
from queue_server.protocol.job_search import SCAN_DEFAULT, JobsPage, JobsSearch
from queue_server.protocol.replies import DoneResult, Job, QueueStats, RunningJob, Total
from queue_server.protocol.reply_parsers import (
    done_parser,
    later_parser,
    parse_get,
    parse_job,
    parse_ok,
    parse_put_outcome,
    parse_server_id,
    parse_stats,
    parse_stats_latency,
    parse_total,
    parse_wait_ack_keyed,
    runlist_parser,
)
from queue_server.protocol.requests import Block, Then

# Either client: the operations use only what ClientCore defines.
Client: TypeAlias = ClientCore[Any]
M = TypeVar("M", bound=Callable[..., Any])


def as_method(method: M, op: Callable[..., Op[Any]]) -> M:
    """`method`, which runs `op`, with op's name, docstring and signature as a client's
    method shows them (self, and the value the operation returns)."""
    update_wrapper(method, op)
    signature = inspect.signature(op)
    client, *params = signature.parameters.values()
    returns = str(signature.return_annotation).removeprefix("Op[").removesuffix("]")
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[client.replace(name="self", annotation=inspect.Parameter.empty), *params], return_annotation=returns)
    return method


def put(
    client: Client,
    queue: str,
    data: bytes | str,
    *,
    priority: int = 0,
    item: str | None = None,
    delay_s: float | None = None,
    key: str | None = None,
    ttl_s: float | None = None,
    until: float | None = None,
) -> Op[str]:
    """Add a job; returns its key (the server's `_<n>`, or `key`). A `key` that a waiting
    or running job holds adds nothing (unique jobs): put_job() says so. For a new
    item's name (new_item=True) use put_job(...).item. With `ttl_s` the server deletes
    the job if it is not handed out within ttl_s of becoming ready (TTL)."""
    result = yield from put_job(client, queue, data, priority=priority, item=item, delay_s=delay_s,
                                key=key, ttl_s=ttl_s, until=until)
    return result.key


def put_job(
    client: Client,
    queue: str,
    data: bytes | str,
    *,
    priority: int = 0,
    item: str | None = None,
    new_item: bool = False,
    delay_s: float | None = None,
    key: str | None = None,
    ttl_s: float | None = None,
    until: float | None = None,
) -> Op[PutResult]:
    """PUT ... KEY: the job's key (the server's with key=None), its item with `new_item=True`,
    and `existing_state` (`existing_queue`: in another queue) when `key` was taken (nothing added).
    `until` (time.monotonic()): sent again to the primary found anew after a refusal or a
    lost connection until then (a slot's reply: without a key, a PUT whose connection was
    lost after it was sent may then be stored twice)."""
    request = req.put_request(queue, data, priority_=priority, item=item, new_item=new_item,
                              delay_s=delay_s, keyed=True, key_=key, ttl_s=ttl_s,
                              trace=current_traceparent() if TRACING else None)  # the producer's span
    # The producer's own key makes the PUT idempotent: retried after a lost connection.
    return client._request(request, parse_put_keyed, idempotent=key is not None, until=until)


def put_many(client: Client, queue: str, datas: Iterable[bytes | str], *, priority: int = 0) -> Op[int]:
    """PUT every item of `datas`, pipelined (put_many.py); returns how many the server
    acknowledged. All replies are read even when some are errors; the first error is then
    raised (the PUTs acknowledged before and after it are stored)."""
    batch = PutMany(queue, datas, priority=priority,
                    trace=current_traceparent() if TRACING else None)
    if not batch.total:
        return 0
    conn = yield from client._ready()
    try:
        for data, replies in batch.steps():
            if data:
                yield Send(conn, data)
            for _ in range(replies):
                batch.add((yield Read(conn, parse_put_outcome, CLIENT_TIMEOUT)))
    except BaseException as exc:
        client._drop()  # replies of the rest are still on the way
        client._raise_failed(conn, batch.what(), exc)
    return batch.result()


def get(
    client: Client,
    queues: str | Sequence[str] | None = None,
    *,
    count: int | None = None,
    expire_s: float | None = None,
    then: Then | None = None,
    block: Block = False,
    keys: bool = False,
    traces: bool = False,
    wake_fd: int | None = None,
    until: float | None = None,
    check_s: float | None = None,
) -> Op[list[Job]]:
    """GET (GETB with block=True, GETBE with "until_empty"); [] on `404 Queue Empty`.
    A blocking get waits as long as it takes, or until `wake_fd` is readable: then WaitWoken,
    the connection closed (no job lost). `until` (time.monotonic()): a refusal or a lost
    connection sends it again to the primary found anew until then (a slot's fetch through
    a failover). `check_s`: the waited-on server's check (wait_check.py, WAIT_CHECK_S)."""
    request = req.get_request(queues, count=count, expire_s=expire_s, then=then, block=block,
                              keys=keys, traces=traces)
    timeout_s = None if block else CLIENT_TIMEOUT
    return client._request(request, parse_get, timeout_s, wake_fd=wake_fd, until=until,
                           check_s=check_s)


def done(client: Client, *ids: int, until: float | None = None) -> Op[list[DoneResult]]:
    """DONE for each id in one request; one DoneResult per id, in order. `until`
    (time.monotonic(), the jobs' lock): sent again to the primary found anew after a
    refusal or a lost connection until then; an id then not found may have been done by
    the first send (queue_server/client/follow.py)."""
    return client._request(req.done_request(ids), done_parser(len(ids)), until=until)


def later(client: Client, *ids: int, delay_s: float | None = None, solo: bool = False,
          front: bool = False, until: float | None = None) -> Op[list[bool]]:
    """LATER for each id in one request; per id, whether it was running. `solo`: each is
    handed out alone next time (Part B); `front`: back at the head of their priority, in
    this order (no delay). `until`: as done()'s."""
    request = req.later_request(ids, delay_s=delay_s, solo=solo, front=front)
    return client._request(request, later_parser(len(ids)), until=until)


def call(
    client: Client,
    queue: str,
    data: bytes | str,
    *,
    output_queue: str | None = None,
    priority: int = 0,
    timeout_s: float | None = None,
    expire_s: float | None = None,
    then: Then | None = None,
    late_reply_s: float = calls.LATE_REPLY_S,
) -> Op[Job]:
    """Put a job under a new item and wait for its handler's reply (PUT ... NEW WAIT).

    The reply comes from `output_queue`, by default `<queue>_reply`, where handlers
    reply (`job.reply(...)`). It is already acknowledged: handed out with EXPIRE 0 THEN
    DONE, the server deletes it (give expire_s/then to hold it running and DONE it
    yourself). After `timeout_s` ReplyTimeout is raised; the connection stays open
    unread for `late_reply_s`, so a late reply is deleted too (queue_server/client/calls.py).
    """
    request = calls.call_request(queue, data, output_queue=output_queue, priority=priority,
                                 expire_s=expire_s, then=then)
    client._close_answered_waits()
    conn = yield from client._ready()
    try:
        _item, key = yield Request(conn, request, parse_wait_ack_keyed,
                                   calls.ack_timeout_s(client.timeout_s, timeout_s))
    except BaseException as exc:
        client._raise_failed(conn, "PUT ... WAIT", exc)
    try:
        job: Job = yield Read(conn, parse_job, timeout_s)
    except TimeoutError:
        # Still waiting in the server: keep it so a late reply is handed out (and deleted).
        client._conn = None
        client._keep_for_late_reply(conn, late_reply_s)
        oq = output_queue if output_queue is not None else calls.reply_queue(queue)
        why = yield from _why_no_reply(client, queue, oq, key, timeout_s)
        raise calls.reply_timeout(conn.address, timeout_s, late_reply_s, why) from None
    except BaseException as exc:  # a late output job would be read as the next reply
        client._raise_failed(conn, "PUT ... WAIT", exc)
    return job


def _why_no_reply(client: Client, queue: str, output_queue: str, key: str | None,
                  timeout_s: float | None) -> Op[str | None]:
    """Ask the server (a fresh connection) about the call's job; None when it cannot say."""
    if key is None:
        return None
    try:
        info = yield from job(client, key)
        counters = (yield from stats(client, queue)).get(queue)
    except (QueueServerError, OSError) as exc:  # a refusal, a lost connection, a timeout
        return f"(the server could not say why: {exc})"
    return calls.why_no_reply(queue, output_queue, info, counters, timeout_s=timeout_s)


def fail(
    client: Client, job_id: int, error: str | bytes, *, delay_s: float | None = None,
    dead: bool = False, solo: bool = False, until: float | None = None,
) -> Op[FailResult]:
    """FAIL a running job with its error: retried after its backoff (or `delay_s`), or
    dead (`dead=True`, or its queue's max_attempts used up). `solo`: hand it out alone.
    `until`: as done()'s."""
    request = jreq.fail_request(job_id, error, delay_s=delay_s, dead=dead, solo=solo)
    return client._request(request, parse_fail, until=until)


def touch(client: Client, *ids: int, expire_s: float | None = None,
          until: float | None = None) -> Op[list[bool]]:
    """TOUCH: renew the locks of running jobs; per id, whether it was running. `until`:
    as done()'s (a master's lease keeper following a failover)."""
    request = jreq.touch_request(ids, expire_s=expire_s)
    return client._request(request, found_parser(len(ids)), until=until)


def job(client: Client, key: str, *, errors: bool = False,
        until: float | None = None) -> Op[JobInfo | None]:
    """JOB: where the job with `key` is; None when no job has it. `errors`: with the errors
    of its last failed attempts (JobInfo.errors; JOB ... ERRORS). `until`: as done()'s."""
    return client._request(jreq.job_request(key, errors=errors), parse_job_info, read_only=True,
                           until=until)


def jobs(client: Client, queue: str, state: str, *, limit: int = 100,
         after: str | None = None, at: str | None = None) -> Op[list[JobInfo]]:
    """JOBS: `limit` jobs of `queue` in `state` after the job `after` (at its position `at`: even if gone)."""
    request = jreq.jobs_request(queue, state, limit=limit, after=after, at=at)
    return client._request(request, parse_jobs, read_only=True)


def search_jobs(client: Client, queue: str, state: str, *, limit: int = 100, after: str | None = None,
                at: str | None = None, prefix: str | None = None, error_type: str | None = None,
                since: float | None = None, until: float | None = None, scan: int = SCAN_DEFAULT) -> Op[JobsPage]:
    """JOBS search (protocol/job_search.py): of at most `scan` jobs after `after`, the matches;
    the page's `after` and `position`, passed as `after` and `at`, go on where it stopped."""
    search = JobsSearch(prefix=prefix, error_type=error_type, since=since, until=until, scan=scan)
    request = jreq.jobs_request(queue, state, limit=limit, after=after, at=at, search=search)
    return client._request(request, parse_jobs_page, read_only=True)


def retry(client: Client, queue: str, *keys: str) -> Op[list[bool]]:
    """RETRY: dead jobs back to ready (attempts reset), failed ones ready now; per key, found."""
    return client._request(jreq.retry_request(queue, keys), found_parser(len(keys)))


def retry_all(client: Client, queue: str, state: str = "dead") -> Op[int]:
    """RETRY <q> ALL DEAD|FAILED: how many jobs became ready."""
    return client._request(jreq.retry_all_request(queue, state), parse_count)


def delete(client: Client, queue: str, *keys: str) -> Op[list[str]]:
    """DELETE: per key "ok", "not_found" or "running" (running jobs are not deleted)."""
    return client._request(jreq.delete_request(queue, keys), delete_parser(len(keys)))


def cancel(client: Client, queue: str, key: str) -> Op[str]:
    """CANCEL (Part B): "removed" (was waiting), "cancelled" (was running: now dead,
    "cancelled by <door>") or "not_found"."""
    return client._request(jreq.cancel_request(queue, key), parse_cancel)


def delete_all_dead(client: Client, queue: str) -> Op[int]:
    """DELETE <q> ALL DEAD: how many dead jobs were deleted."""
    return client._request(jreq.delete_all_dead_request(queue), parse_count)


def stats(client: Client, queue: str | None = None) -> Op[dict[str, QueueStats]]:
    """STATS [q]: queue name -> its counters."""
    request = req.named_request(b"STATS", queue)
    return client._request(request, parse_stats, read_only=True)


def stats_of(client: Client, queues: Sequence[str]) -> Op[dict[str, QueueStats]]:
    """STATS q1|q2|... (Part B): the named queues only (at most 1,000; one name: STATS q)."""
    request = req.stats_of_request(queues)
    return client._request(request, parse_stats, read_only=True)


def stats_top(client: Client, count: int) -> Op[dict[str, QueueStats]]:
    """STATS TOP n (Part B): the n queues holding the most jobs, and "*" for all others summed."""
    return client._request(req.stats_top_request(count), parse_stats, read_only=True)


def stats_latency(client: Client, queues: Sequence[str]) -> Op[dict[str, Any]]:
    """STATS LATENCY q1|q2|... (Part B): per queue the wait, run and ready-to-done histograms
    (counts per bucket of `bounds_s`, +Inf last, and sums) and failures by error type."""
    return client._request(req.stats_latency_request(queues), parse_stats_latency, read_only=True)


def total(client: Client, queue: str | None = None) -> Op[Total]:
    """TOTAL [q]."""
    request = req.named_request(b"TOTAL", queue)
    return client._request(request, parse_total, read_only=True)


def runlist(client: Client, *, with_data: bool = False) -> Op[list[RunningJob]]:
    """RUNLIST [DATA]: the running jobs."""
    request, parse = req.runlist_request(with_data=with_data), runlist_parser(with_data=with_data)
    return client._request(request, parse, read_only=True)


def interconnect(client: Client) -> Op[int | None]:
    """INTERCONNECT: the id of the server in use (None if it answers with an error)."""
    return client._request(req.INTERCONNECT, parse_server_id, read_only=True)


def ping(client: Client) -> Op[None]:
    """PING; raises when the server does not answer `200 PONG`."""
    text = yield from client._request(req.PING, parse_ok, read_only=True)
    if text != "PONG":
        raise BadReply(f"unexpected reply to PING: {text!r}")
