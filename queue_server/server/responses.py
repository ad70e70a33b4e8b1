"""Prebuilt and encoded server replies (status lines end with CRLF)."""
from __future__ import annotations

from collections.abc import Sequence

from queue_server.protocol.keyed import Key, key_bytes
from queue_server.server.store import DoneResult, Job, Store, Totals
from queue_server.server.store_types import _DONE_HOLDING

OK = b"200 OK\r\n"
QUEUE_EMPTY = b"404 Queue Empty\r\n"
JOB_NOT_FOUND = b"404 Job Not Found\r\n"
OFFLINE = b"500 Offline Mode\r\n"
WAIT_FOR_OUTPUT = b"206 Wait for output\r\n"
AUTH_REQUIRED = b"401 Auth Required\r\n"
UNAUTHORIZED = b"401 Unauthorized\r\n"
GOODBYE = b"221 Goodbye\r\n"
SHUTTING_DOWN = b"221 Shutting Down\r\n"
PONG = b"200 PONG\r\n"
SWITCHED_OFFLINE = b"200 OK Switched to Offline Mode\r\n"
SWITCHED_ONLINE = b"200 OK Switched to Online Mode\r\n"
INVALID_SNAPSHOT = b"500 Invalid Snapshot\r\n"
LINE_TOO_LONG = b"400 Line Too Long\r\n"
REPLACK_OFF_LINK = b"400 Bad Request: REPLACK only on a replication link\r\n"
JOB_TOO_LARGE = b"413 Job Too Large\r\n"
JOB_RUNNING = b"409 Job Running\r\n"
FAIL_DEAD = b"200 OK DEAD\r\n"
_DELETE_REPLIES = {"ok": OK, "not_found": JOB_NOT_FOUND, "running": JOB_RUNNING}

_DONE_REPLIES = {
    (False, False): OK,
    (True, False): b"200 OK FINQ\r\n",
    (False, True): b"200 OK FINI\r\n",
    (True, True): b"200 OK FINQ FINI\r\n",
}


def done_reply(results: Sequence[DoneResult]) -> bytes:
    if results.count(_DONE_HOLDING) == len(results):  # each one done, nothing finished (a slot's
        return OK * len(results)  # batch): counted by identity in C, no generator step per job
    return b"".join(
        _DONE_REPLIES[result.queue_finished, result.item_finished] if result.found else JOB_NOT_FOUND
        for result in results
    )


def later_reply(results: Sequence[bool]) -> bytes:
    return b"".join(OK if found else JOB_NOT_FOUND for found in results)


def _job_head(job: Job, keys: bool = False, traces: bool = False) -> bytes:
    head = b"%s %d %d %d" % (job.queue.name.encode(), job.id, job.priority, len(job.data))
    if job.item is not None:
        head += b" IS " + job.item.encode()
    if keys:
        head += b" KEY %s ATTEMPT %d" % (key_bytes(job.key), job.attempts)
        if traces and job.history is not None and job.history.trace is not None:
            head += b" TRACE " + job.history.trace
    return head + b"\r\n"


def job_reply(job: Job, keys: bool = False, traces: bool = False) -> list[bytes]:
    return [b"200 OK ", _job_head(job, keys, traces), job.data]


def batch_reply(jobs: Sequence[Job], keys: bool = False, traces: bool = False) -> list[bytes]:
    parts = [b"200 OK %d JOBS\r\n" % len(jobs)]
    for job in jobs:
        if keys or job.item is not None:
            parts.append(_job_head(job, keys, traces))
        else:  # _job_head's plain line without its call (a slot's GET ... COUNT: -560 instructions a job)
            parts.append(b"%s %d %d %d\r\n" % (job.queue.name.encode(), job.id, job.priority, len(job.data)))
        parts.append(job.data)
    return parts


def key_reply(base: bytes, key: Key, existing: str | None = None, elsewhere: str | None = None) -> bytes:
    """`<base> KEY <key>[ EXISTS <state>[ QUEUE <queue>]]` from a reply line (`200 OK`, `200 OK
    IS <item>`, ...); `elsewhere`: the queue of the job holding the key, when not the PUT's."""
    line = base[:-2] + b" KEY " + key_bytes(key)
    if existing is not None:
        line += b" EXISTS " + existing.encode()
        if elsewhere is not None:
            line += b" QUEUE " + elsewhere.encode()
    return line + b"\r\n"


def fail_reply(outcome: float | None) -> bytes:
    """FAIL's reply: `200 OK DEAD` or `200 OK RETRY <unix time of the next run>`."""
    if outcome is None:
        return FAIL_DEAD
    return b"200 OK RETRY " + repr(round(outcome, 6)).encode() + b"\r\n"


def count_reply(count: int) -> bytes:
    return b"200 OK %d\r\n" % count


def delete_reply(outcomes: Sequence[str]) -> bytes:
    return b"".join(_DELETE_REPLIES[outcome] for outcome in outcomes)


def item_reply(base: bytes, item: str) -> bytes:
    """`200 OK IS <item>` / `206 Wait for output IS <item>` from the plain reply."""
    return base[:-2] + b" IS " + item.encode() + b"\r\n"


def total_reply(totals: Totals) -> bytes:
    return b"200 OK %d %d %d %d\r\n" % (totals.queues, totals.priorities, totals.jobs, totals.running)


def runlist_reply(store: Store, with_data: bool) -> bytes:
    lines = [b"200 OK %d\r\n" % len(store.running)]
    blocks = []
    for job_id, job in store.running.items():
        line = b"%d %s %d" % (job_id, job.queue.name.encode(), job.priority)
        if with_data:
            line += b" %d" % len(job.data)
            blocks.append(job.data)
        if job.expire_at is not None:
            line += b" EXPIRE " + repr(round(job.expire_at, 6)).encode()
        lines.append(line + b"\r\n")
    return b"".join(lines) + b"".join(blocks)
