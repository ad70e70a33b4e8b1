"""Failure events from the queue server's counters (pure: manager.events.failures)."""
from __future__ import annotations

from manager.events.failures import failed_attempts, failure_events, growth
from manager.storage.store import EventKind
from queue_server.protocol.replies import QueueStats


def stats(queue: str, *, failed_total: int = 0, dead_total: int = 0, dead_dropped: int = 0,
          failed: int = 0, dead: int = 0) -> QueueStats:
    return QueueStats(
        queue=queue, ready=0, delayed=failed, running=0, put=0, done=0, later=0, expired=0,
        by_priority={}, oldest_ready_age_s=None, failed=failed, dead=dead, failed_total=failed_total,
        dead_total=dead_total, dead_dropped=dead_dropped,
    )


def test_the_first_read_only_sets_the_baseline() -> None:
    assert failure_events(None, {"photos": stats("photos", failed_total=500, dead_total=3)}) == []


def test_after_a_read_of_a_server_without_queues_a_new_queue_counts_from_zero() -> None:
    [failed, dead] = failure_events({}, {"photos": stats("photos", failed_total=3, dead_total=1)})
    assert ((failed.detail or {})["count"], (dead.detail or {})["count"]) == (3, 1)


def test_growth_since_the_last_read_is_one_event_per_kind_and_queue_with_its_count() -> None:
    before = {"photos": stats("photos", failed_total=10, dead_total=1), "mail": stats("mail")}
    after = {"photos": stats("photos", failed_total=52, dead_total=4, dead_dropped=2, failed=7, dead=3),
             "mail": stats("mail")}
    events = failure_events(before, after)
    assert [(e.kind, e.queue, (e.detail or {})["count"]) for e in events] == [
        (EventKind.JOBS_FAILED, "photos", 42), (EventKind.JOBS_DEAD, "photos", 3),
        (EventKind.DEAD_JOBS_DROPPED, "photos", 2)]
    assert events[0].message == "photos: 42 failed attempts; 7 jobs waiting for a retry"
    assert events[1].message == "photos: 3 jobs dead (out of attempts, or failed as dead); 3 dead jobs kept"


def test_a_queue_new_since_the_last_read_counts_from_zero() -> None:
    before = {"photos": stats("photos")}
    [event] = failure_events(before, {"photos": stats("photos"), "new": stats("new", failed_total=1, failed=1)})
    assert (event.kind, event.queue, event.message) == (
        EventKind.JOBS_FAILED, "new", "new: 1 failed attempt; 1 job waiting for a retry")


def test_a_counter_that_went_down_means_a_restarted_server_and_counts_from_zero() -> None:
    assert growth(100, 130) == 30
    assert growth(100, 4) == 4
    assert growth(7, 7) == 0


def test_failed_attempts_per_queue_since_the_last_read_and_none_without_a_baseline() -> None:
    assert failed_attempts(None, {"photos": stats("photos", failed_total=9)}) is None
    assert failed_attempts({}, {"photos": stats("photos", failed_total=9)}) == {"photos": 9}
    before = {"photos": stats("photos", failed_total=9)}
    after = {"photos": stats("photos", failed_total=12), "new": stats("new", failed_total=2)}
    assert failed_attempts(before, after) == {"photos": 3, "new": 2}
