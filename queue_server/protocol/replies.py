"""What the queue server's replies carry, as the clients hand it out: jobs, DONE results,
TOTAL and STATS counters, RUNLIST entries. Parsed in reply_parsers.py."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Job:
    """A job handed out by GET (or to a PUT ... WAIT caller); `id` is its running id."""

    queue: str
    id: int
    priority: int
    data: bytes
    item: str | None = None
    key: str | None = None  # the job's stable key (GET ... KEYS), kept across hand-outs
    attempt: int | None = None  # this hand-out's number, 1 on the first run (GET ... KEYS)
    trace: str | None = None  # the W3C traceparent it was put with (GET ... KEYS TRACES)

    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


@dataclass(frozen=True, slots=True)
class DoneResult:
    """One id's answer to DONE: FINQ is `queue_finished`, FINI is `item_finished`."""

    found: bool
    queue_finished: bool = False
    item_finished: bool = False


@dataclass(frozen=True, slots=True)
class Total:
    """TOTAL: queues holding a job, (queue, priority) classes waiting, waiting jobs, running jobs."""

    queues: int
    priorities: int
    jobs: int
    running: int


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue's entry of STATS; counters run since the server started."""

    queue: str
    ready: int
    delayed: int
    running: int
    put: int
    done: int
    later: int
    expired: int
    by_priority: dict[int, int]
    oldest_ready_age_s: float | None
    # Issue 9 (PROTOCOL.md Part B); 0 from a server that does not report them.
    failed: int = 0  # waiting for a retry (also counted in delayed)
    dead: int = 0
    failed_total: int = 0  # counters since the server started
    dead_total: int = 0
    dead_dropped: int = 0
    retried: int = 0
    deleted: int = 0
    ttl_expired: int = 0  # PUT ... TTL jobs deleted, not handed out in time
    kept: int = 0  # issue 26: finished jobs kept now (JOBS <q> done)
    # Issue 15: whether the server's config names the queue (None: a server that does not
    # say); RETRY / DELETE per door (CLIENT NAME) since start.
    configured: bool | None = None
    retried_by: dict[str, int] = field(default_factory=dict)
    deleted_by: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunningJob:
    """One RUNLIST entry; `length` and `data` only with RUNLIST DATA, `expires_at` is a unix time."""

    id: int
    queue: str
    priority: int
    length: int | None = None
    expires_at: float | None = None
    data: bytes | None = None


_KEYED_STATS = ("failed", "dead", "failed_total", "dead_total", "dead_dropped", "retried", "deleted",
                "ttl_expired", "kept")


def queue_stats(queue: str, entry: dict[str, Any]) -> QueueStats:
    """One STATS entry; keys the client does not know are ignored."""
    age = entry.get("oldest_ready_age_s")
    return QueueStats(
        queue=queue,
        ready=int(entry["ready"]),
        delayed=int(entry["delayed"]),
        running=int(entry["running"]),
        put=int(entry["put"]),
        done=int(entry["done"]),
        later=int(entry["later"]),
        expired=int(entry["expired"]),
        by_priority={int(p): int(n) for p, n in entry.get("by_priority", {}).items()},
        oldest_ready_age_s=None if age is None else float(age),
        **{name: int(entry.get(name, 0)) for name in _KEYED_STATS},
        configured=bool(entry["configured"]) if "configured" in entry else None,
        retried_by=_door_counts(entry.get("retried_by")),
        deleted_by=_door_counts(entry.get("deleted_by")),
    )


def _door_counts(value: object) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(door): int(count) for door, count in value.items()}
