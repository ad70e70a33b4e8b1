"""The dashboard's side of the store: admin writes (an override with its event, an event alone) and typed reads."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_store import database_url  # noqa: F401  (fixture: SQLite, and PostgreSQL when configured)

from config.models import QueueConfig
from manager.storage.model import Plan, QueuePlan, SlotMap
from manager.storage.samples import queue_samples, slot_map_rows
from manager.storage.store import EventKind, NewEvent, Override, Store
from manager.storage.store_reads import (
    DatabaseUnreadable,
    EventQuery,
    QueueReading,
    SlotMapCell,
    StoredEvent,
    reading,
)


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:  # noqa: F811
    opened = Store.open(database_url)
    yield opened
    opened.close()


def test_an_override_and_its_event_are_stored_together_and_read_back(store: Store) -> None:
    paused = Override(queue="q", paused=True, min_slots=None, max_slots=None, updated_at_unix=10.0)
    first = store.save_override(10.0, paused, NewEvent(EventKind.PAUSE_REQUESTED, "pause", queue="q", actor="admin"))
    limited = Override(queue="q", paused=True, min_slots=1, max_slots=4, updated_at_unix=11.0)
    second = store.save_override(11.0, limited, NewEvent(EventKind.LIMITS_CHANGED, "limits", queue="q",
                                                         actor="admin", detail={"min_slots": 1}))
    assert second > first
    with reading(store) as reads:
        assert reads.override("q") == limited
        assert reads.override("other") is None
        assert reads.overrides() == {"q": limited}
        events, more = reads.events(EventQuery(queue="q"))
    assert store.overrides() == {"q": limited}
    assert not more
    assert events == [
        StoredEvent(id=second, at_unix=11.0, kind="limits_changed", queue="q", host=None, actor="admin",
                    message="limits", detail={"min_slots": 1}),
        StoredEvent(id=first, at_unix=10.0, kind="pause_requested", queue="q", host=None, actor="admin",
                    message="pause", detail=None),
    ]


def test_events_filter_and_page_back_newest_first(store: Store) -> None:
    ids = [store.add_event(float(at), NewEvent(kind, "m", host=host))
           for at, (kind, host) in enumerate([(EventKind.MASTER_JOINED, "a"), (EventKind.MASTER_LOST, "a"),
                                              (EventKind.MASTER_JOINED, "b"), (EventKind.JOBS_RETRIED, None)])]
    with reading(store) as reads:
        joined, more = reads.events(EventQuery(kind=EventKind.MASTER_JOINED, limit=1))
        assert [event.id for event in joined] == [ids[2]] and more
        older, more = reads.events(EventQuery(kind=EventKind.MASTER_JOINED, before_id=ids[2]))
        assert [event.id for event in older] == [ids[0]] and not more
        assert [event.id for event in reads.events(EventQuery(host="a", since_unix=1.0))[0]] == [ids[1]]
        assert sorted(reads.event_kinds()) == ["jobs_retried", "master_joined", "master_lost"]
        assert reads.last_event_at(EventKind.MASTER_JOINED) == 2.0
        assert [(count.kind, count.count) for count in sorted(reads.kind_counts(after_id=ids[0]),
                                                               key=lambda count: count.kind)] == [
            ("jobs_retried", 1), ("master_joined", 1), ("master_lost", 1)]


def test_samples_come_back_as_records_newest_per_queue(store: Store) -> None:
    plan = Plan(slot_map=SlotMap(hosts={"h": {"h:1": "q", "h:2": "q"}}), moves=(),
                queues={"q": QueuePlan("q", 3, 0.5, 1.0, 2, 2, 2)})
    for at in (100.0, 110.0):
        store.write(queue_samples(at_unix=at, plan=plan, queues={"q": QueueConfig(priority=3)}, paused=[],
                                  window={}, window_s=10.0, interval={}, interval_s=10.0, server={}))
        store.write(slot_map_rows(at_unix=at, slot_map=plan.slot_map))
    with reading(store) as reads:
        assert reads.missing_tables() == []
        [latest] = reads.latest_queue_samples(forget_after_s=60.0)
        assert isinstance(latest, QueueReading)
        assert (latest.queue, latest.at_unix, latest.priority, latest.slots_current) == ("q", 110.0, 3, 2)
        assert reads.latest_queue_sample("q") == latest
        assert reads.latest_queue_at("q") == 110.0 and reads.latest_queue_at("none") is None
        assert reads.slot_map() == [SlotMapCell(at_unix=110.0, host="h", queue="q", slots=2)]
        [bucket] = reads.queue_buckets("q", since_unix=0.0, until_unix=200.0, bucket_s=1000.0)
        assert (bucket.at_unix, bucket.slots_current, bucket.load) == (110.0, 2.0, 0.5)
        [counts] = reads.queue_counts(after_id=0)
        assert (counts.queue, counts.jobs_done) == ("q", 0.0)
        assert reads.newest_ids()[0] == counts.last_id


def test_a_database_without_tables_reports_them_missing_and_one_that_cannot_open_says_so(tmp_path: Path) -> None:
    empty = Store.connect(f"sqlite:///{tmp_path / 'empty.db'}")
    with reading(empty) as reads:
        assert reads.missing_tables() == ["queue_samples", "host_samples", "slot_map", "events", "queue_overrides"]
    empty.close()
    assert not (tmp_path / "absent").exists()
    broken = Store.connect(f"sqlite:///{tmp_path / 'absent' / 'slotmap.db'}")
    with reading(broken) as reads, pytest.raises(DatabaseUnreadable, match="unable to open"):
        reads.missing_tables()
    assert not (tmp_path / "absent").exists()
    broken.close()
