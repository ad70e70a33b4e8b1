"""The events page folds a storm of failure events into one row with a count (pure: views.group_failures)."""
from __future__ import annotations

from admin_testing import TestClient
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from admin_ui.schemas import EventView
from admin_ui.views import group_failures
from manager.storage.db import Event


def event(event_id: int, kind: str, queue: str | None, count: int | None = None) -> EventView:
    return EventView(id=event_id, at_unix=1000.0 + event_id, kind=kind, queue=queue, host=None,
                     actor="manager", message=f"{kind} {event_id}",
                     detail=None if count is None else {"count": count})


def test_a_run_of_failure_events_of_one_queue_is_one_row_with_the_summed_count() -> None:
    newest_first = [event(i, "jobs_failed", "photos", count=i) for i in range(10, 0, -1)]
    [row] = group_failures(newest_first)
    assert (row.id, row.count, row.grouped) == (10, sum(range(1, 11)), 10)
    assert row.message == "jobs_failed 10"
    assert (row.at_unix, row.first_at_unix) == (1010.0, 1001.0)


def test_other_queues_kinds_and_events_between_break_the_run() -> None:
    rows = group_failures([
        event(6, "jobs_failed", "photos", 2), event(5, "jobs_failed", "photos", 3),
        event(4, "jobs_failed", "mail", 1), event(3, "slots_moved", "photos"),
        event(2, "slots_moved", "photos"), event(1, "jobs_failed", "photos", 4),
    ])
    assert [(r.id, r.count, r.grouped) for r in rows] == [(6, 5, 2), (4, 1, 1), (3, 1, 1), (2, 1, 1), (1, 4, 1)]


def test_an_event_without_a_count_counts_one() -> None:
    [row] = group_failures([event(2, "jobs_dead", "q"), event(1, "jobs_dead", "q", count=0)])
    assert (row.count, row.grouped) == (2, 2)


def test_the_events_page_and_the_grouped_api_show_a_storm_as_one_row(
    client: TestClient, engine: Engine,
) -> None:
    with Session(engine) as session:
        session.add_all(Event(at_unix=2e9 + i, kind="jobs_failed", queue="storm_q", actor="manager",
                              message=f"storm_q: {i} failed attempts", detail={"count": i})
                        for i in range(1, 51))
        session.commit()
    grouped = client.get("/api/events", params={"queue": "storm_q", "group": "true"}).json()["events"]
    assert [(e["count"], e["grouped"]) for e in grouped] == [(sum(range(1, 51)), 50)]
    plain = client.get("/api/events", params={"queue": "storm_q"}).json()["events"]
    assert len(plain) == 50
    page = client.get("/events", params={"queue": "storm_q"}).text
    assert page.count("storm_q: 50 failed attempts") == 1
    assert "storm_q: 49 failed attempts" not in page
    assert f"&times;{sum(range(1, 51)):,}" in page
    assert 'href="/queues/storm_q/jobs?state=failed"' in page
