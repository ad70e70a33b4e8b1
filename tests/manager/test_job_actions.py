"""Retry and delete events from the queue server's counts per door (pure: manager.events.job_actions),
and the queue server's bound on the doors it counts (queue_server.server.store_types)."""
from __future__ import annotations

from manager.events.job_actions import job_action_events
from manager.storage.store import EventKind
from queue_server.protocol.replies import QueueStats
from queue_server.server.store_types import MAX_DOORS, OTHER_DOOR, count_door


def stats(queue: str, retried_by: dict[str, int] | None = None,
          deleted_by: dict[str, int] | None = None) -> QueueStats:
    return QueueStats(queue=queue, ready=0, delayed=0, running=0, put=0, done=0, later=0, expired=0,
                      by_priority={}, oldest_ready_age_s=None, retried_by=retried_by or {},
                      deleted_by=deleted_by or {})


def test_the_first_read_only_sets_the_baseline() -> None:
    assert job_action_events(None, {"q": stats("q", {"cli": 5})}) == []


def test_growth_per_door_becomes_one_event_each_and_the_dashboards_doors_are_left_to_it() -> None:
    before = {"q": stats("q", {"cli": 1, "api": 2}, {"cli": 4})}
    after = {"q": stats("q", {"cli": 3, "api": 9, "dashboard": 1, "client": 1, "nightly": 2}, {"cli": 5}),
             "new": stats("new", {"cli": 1})}
    events = job_action_events(before, after)
    assert [(e.kind, e.queue, e.actor, (e.detail or {})["count"]) for e in events] == [
        (EventKind.JOBS_RETRIED, "new", "cli", 1),
        (EventKind.JOBS_RETRIED, "q", "cli", 2),
        (EventKind.JOBS_RETRIED, "q", "client", 1),
        (EventKind.JOBS_RETRIED, "q", "nightly", 2),
        (EventKind.JOBS_DELETED, "q", "cli", 1),
    ]
    assert events[1].message == "q: 2 jobs retried with the CLI (slotmap retry)"
    assert events[2].message == "q: 1 job retried by a queue client (RETRY request)"
    assert events[3].message == "q: 2 jobs retried by queue client 'nightly' (RETRY request)"
    assert events[4].message == "q: 1 job deleted with the CLI (slotmap delete)"


def test_a_restarted_queue_server_counts_from_zero_again() -> None:
    [event] = job_action_events({"q": stats("q", {"cli": 7})}, {"q": stats("q", {"cli": 2})})
    assert (event.detail or {})["count"] == 2


def test_the_server_counts_at_most_max_doors_names_per_queue_then_other() -> None:
    counts: dict[str, int] | None = None
    for n in range(MAX_DOORS + 3):
        counts = count_door(counts, f"door{n}", 1)
    counts = count_door(counts, "door0", 2)
    assert counts is not None and len(counts) == MAX_DOORS + 1
    assert counts[OTHER_DOOR] == 3 and counts["door0"] == 3
