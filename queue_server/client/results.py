"""Finished jobs' results on the client (PROTOCOL.md Part B "Finished jobs and results"):
DONE ... RESULT, and `result()`, which waits for a job to finish as RQ's `job.result` or
Celery's `AsyncResult.get` do, in the server (RESULT ... TIMEOUT): nothing polls."""
from __future__ import annotations

import math
import time

from queue_server.client.core import CLIENT_TIMEOUT
from queue_server.client.effects import Op, Sleep
from queue_server.client.follow import WAIT_CHECK_S, follow_pause
from queue_server.client.operations import Client
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import ConnectionLost, OfflineError, QueueServerError
from queue_server.protocol.finished import MAX_RESULT_WAIT_S
from queue_server.protocol.job_info import JobInfo
from queue_server.protocol.job_replies import parse_job_info
from queue_server.protocol.replies import DoneResult
from queue_server.protocol.reply_parsers import done_parser


class JobNotFinished(QueueServerError, TimeoutError):
    """result(): the job had not finished when the timeout ran out (`info`: as it was then)."""

    def __init__(self, info: JobInfo) -> None:
        super().__init__(0, f"job {info.key} of {info.queue} is still {info.state}")
        self.info = info


class JobFailedError(QueueServerError):
    """result(): the job is dead (`info.error` says why: its last error, or "cancelled by ...")."""

    def __init__(self, info: JobInfo) -> None:
        super().__init__(0, f"job {info.key} of {info.queue} is dead: {info.error}")
        self.info = info


class NoResult(QueueServerError):
    """result(): no such job in that queue (never put, deleted, or finished longer ago than its
    queue keeps finished jobs: keep_done_s, keep_done_max), or its result was too large to keep."""

    def __init__(self, text: str) -> None:
        super().__init__(0, text)


def as_bytes(result: bytes | str) -> bytes:
    return result.encode("utf-8") if isinstance(result, str) else result


def done_with_result(client: Client, job_id: int, result: bytes | str, *,
                     until: float | None = None) -> Op[DoneResult]:
    """DONE <id> RESULT: the job is finished, and `result` kept with it (if it is at most its
    queue's max_result_bytes; else the finished job says how large it was). `until`: as done()'s."""
    data = as_bytes(result)
    request = b"DONE " + req.job_id(job_id) + b" RESULT %d\r\n" % len(data) + data
    [outcome] = yield from client._request(request, done_parser(1), until=until)
    return outcome


def done_large(client: Client, job_id: int, result_len: int, *,
               until: float | None = None) -> Op[DoneResult]:
    """DONE <id> LARGE <n>: the job is finished with a result of `result_len` bytes, too large
    to send (over the server's max_job_bytes): not kept, and the finished job says how large
    (as for one over max_result_bytes), rather than looking as if it returned nothing."""
    request = b"DONE " + req.job_id(job_id) + b" LARGE %d\r\n" % result_len
    [outcome] = yield from client._request(request, done_parser(1), until=until)
    return outcome


def finished(client: Client, queue: str, key: str, *, timeout_s: float = 0.0) -> Op[JobInfo | None]:
    """RESULT: the job as JOB shows it once it has finished (state "done") or died (state
    "dead"), waiting in the server up to `timeout_s`; as it is then if still waiting or
    running; None when `queue` holds no such job. ValueError for a NaN `timeout_s` (inf waits on).
    A lost connection or a refusal (a failover, a restart), or a server that stops answering
    (follow.py WAIT_CHECK_S), is waited out within `timeout_s`, on the primary found anew;
    past it, raised."""
    if math.isnan(timeout_s):
        # No deadline is ever reached with NaN, and each turn would ask again without a wait.
        raise ValueError("timeout must be a number of seconds, got nan")
    deadline = time.monotonic() + timeout_s
    while True:
        wait_s = min(MAX_RESULT_WAIT_S, max(0.0, deadline - time.monotonic()))
        request = b"RESULT " + req.name(queue) + b" " + req.key(key)
        if wait_s:
            request += b" TIMEOUT " + req.seconds(wait_s, what="timeout")
        # The server holds the reply up to wait_s: the client's own timeout counts after it.
        reply_s = wait_s + client.timeout_s if wait_s else CLIENT_TIMEOUT
        try:
            # A wait is not sent again by the reconnect rule: that would send the same TIMEOUT,
            # and a result(timeout=4) cut by a failover at 2.5 s waited 6.5 s. It goes again
            # from here, with what is left of the timeout, to the primary found anew.
            # The wait's server is checked as a blocking GET's is (a frozen primary never
            # answers: the wait sat there for its timeout plus the client's, 90 s for
            # result(timeout=60), while the job finished on the promoted replica).
            info = yield from client._request(request + b"\r\n", parse_job_info, reply_s,
                                              read_only=not wait_s, check_s=WAIT_CHECK_S)
        except (ConnectionLost, OfflineError) as exc:
            pause = follow_pause(exc, deadline, time.monotonic())
            if pause is None:
                raise
            client._drop()
            yield Sleep(pause)
            continue
        if info is None or info.state in ("done", "dead") or time.monotonic() >= deadline:
            return info


def result(client: Client, queue: str, key: str, *, timeout: float = 0.0) -> Op[str | None]:
    """The result of the job `key` of `queue` (what its handler returned, or job.result(data)),
    waiting up to `timeout` seconds for it to finish; None for a job that finished without one.
    Raises JobNotFinished (TimeoutError), JobFailedError (dead) or NoResult."""
    info = yield from finished(client, queue, key, timeout_s=timeout)
    if info is None:
        raise NoResult(f"no job {key} in {queue} (never put, deleted, or finished longer ago than "
                       "its queue keeps finished jobs: keep_done_s, keep_done_max)")
    if info.state == "dead":
        raise JobFailedError(info)
    if info.state != "done":
        raise JobNotFinished(info)
    if not info.result_kept:
        raise NoResult(f"job {key} of {queue} finished with a result of {info.result_len} bytes, "
                       "over its queue's max_result_bytes: not kept")
    return info.result
