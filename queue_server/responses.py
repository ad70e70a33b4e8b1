"""Prebuilt and encoded server replies (status lines end with CRLF)."""
from __future__ import annotations

import json
from collections.abc import Sequence

from queue_server.store import DoneResult, Job, Store, Totals

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
JOB_TOO_LARGE = b"413 Job Too Large\r\n"

_DONE_REPLIES = {
    (False, False): OK,
    (True, False): b"200 OK FINQ\r\n",
    (False, True): b"200 OK FINI\r\n",
    (True, True): b"200 OK FINQ FINI\r\n",
}


def done_reply(results: Sequence[DoneResult]) -> bytes:
    return b"".join(
        _DONE_REPLIES[result.queue_finished, result.item_finished] if result.found else JOB_NOT_FOUND
        for result in results
    )


def later_reply(results: Sequence[bool]) -> bytes:
    return b"".join(OK if found else JOB_NOT_FOUND for found in results)


def _job_head(job: Job) -> bytes:
    head = b"%s %d %d %d" % (job.queue.name.encode(), job.id, job.priority, len(job.data))
    if job.item is not None:
        head += b" IS " + job.item.encode()
    return head + b"\r\n"


def job_reply(job: Job) -> list[bytes]:
    return [b"200 OK ", _job_head(job), job.data]


def batch_reply(jobs: Sequence[Job]) -> list[bytes]:
    parts = [b"200 OK %d JOBS\r\n" % len(jobs)]
    for job in jobs:
        parts.append(_job_head(job))
        parts.append(job.data)
    return parts


def item_reply(base: bytes, item: str) -> bytes:
    """`200 OK IS <item>` / `206 Wait for output IS <item>` from the plain reply."""
    return base[:-2] + b" IS " + item.encode() + b"\r\n"


def total_reply(totals: Totals) -> bytes:
    return b"200 OK %d %d %d %d\r\n" % (totals.queues, totals.priorities, totals.jobs, totals.running)


def stats_json(store: Store, name: str | None, now: float) -> bytes:
    names = [name] if name is not None else sorted(store.queues)
    report: dict[str, dict[str, object]] = {}
    for queue_name in names:
        state = store.queues.get(queue_name)
        if state is None:
            report[queue_name] = {
                "ready": 0, "delayed": 0, "running": 0, "put": 0, "done": 0, "later": 0,
                "expired": 0, "by_priority": {}, "oldest_ready_age_s": 0.0,
            }
            continue
        oldest = state.oldest_ready_at()
        report[queue_name] = {
            "ready": state.ready,
            "delayed": state.delayed,
            "running": state.running,
            "put": state.put,
            "done": state.done,
            "later": state.later,
            "expired": state.expired,
            "by_priority": {str(p): n for p, n in sorted(state.waiting_by_priority.items(), reverse=True)},
            "oldest_ready_age_s": round(max(0.0, now - oldest), 6) if oldest is not None else 0.0,
        }
    body = json.dumps(report, separators=(",", ":")).encode()
    return b"200 OK %d\r\n" % len(body) + body


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
