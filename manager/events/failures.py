"""Failure events from the queue server's counters (pure): one event per queue and plan, with a count.

Each plan reads STATS; the growth of `failed_total`, `dead_total` and `dead_dropped` since
the previous read becomes at most one event of each kind per queue, so a storm of errors
is a handful of rows with counts (the dashboard's events page folds those into one),
never a row per failure. The first read only sets the baseline: failures from before the
manager watched are the queue server's counters' business (/metrics).
"""
from __future__ import annotations

from collections.abc import Mapping

from manager.storage.store import EventKind, NewEvent
from queue_server.protocol.replies import QueueStats


def growth(before: int, after: int) -> int:
    """How much a counter grew; a counter that went down was reset (the server restarted)."""
    return after - before if after >= before else after


def failed_attempts(before: Mapping[str, QueueStats] | None,
                    after: Mapping[str, QueueStats]) -> dict[str, int] | None:
    """Per queue, the failed attempts since the previous read (the queue server's count: FAILs
    from slots and masters, expired managed locks); None on the first read (`before` None).
    A queue missing from `before` is new on the server: it counts from 0."""
    if before is None:
        return None
    return {name: growth(before[name].failed_total if name in before else 0, now.failed_total)
            for name, now in after.items()}


def failure_events(before: Mapping[str, QueueStats] | None,
                   after: Mapping[str, QueueStats]) -> list[NewEvent]:
    """`before` None: the first read, which only sets the baseline."""
    if before is None:
        return []
    events: list[NewEvent] = []
    for name in sorted(after):
        now = after[name]
        was = before.get(name)
        failed = growth(was.failed_total if was else 0, now.failed_total)
        died = growth(was.dead_total if was else 0, now.dead_total)
        dropped = growth(was.dead_dropped if was else 0, now.dead_dropped)
        if failed:
            events.append(NewEvent(
                kind=EventKind.JOBS_FAILED, queue=name,
                message=f"{name}: {failed} failed attempt{_s(failed)}; {now.failed} job{_s(now.failed)} "
                        "waiting for a retry",
                detail={"count": failed, "failed_waiting": now.failed, "failed_total": now.failed_total},
            ))
        if died:
            events.append(NewEvent(
                kind=EventKind.JOBS_DEAD, queue=name,
                message=f"{name}: {died} job{_s(died)} dead (out of attempts, or failed as dead); "
                        f"{now.dead} dead job{_s(now.dead)} kept",
                detail={"count": died, "dead": now.dead, "dead_total": now.dead_total},
            ))
        if dropped:
            events.append(NewEvent(
                kind=EventKind.DEAD_JOBS_DROPPED, queue=name,
                message=f"{name}: {dropped} dead job{_s(dropped)} dropped (over dead_max or dead_max_age_s)",
                detail={"count": dropped, "dead_dropped": now.dead_dropped},
            ))
    return events


def _s(count: int) -> str:
    return "" if count == 1 else "s"
