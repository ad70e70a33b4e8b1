"""/metrics: per-queue and per-host gauges from the newest samples, counters that only grow."""
from __future__ import annotations

from pathlib import Path

import admin_sample
import pytest
from admin_sample import NOW, QUEUES
from admin_testing import CLOCK, TEST_CLIENT_HOSTS, TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from admin_ui.app import create_app
from admin_ui.settings import AdminSettings
from manager.storage.db import Event, QueueSample, make_engine
from manager.storage.store import Store

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: TestClient) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def queue_value(samples: Samples, name: str, queue: str) -> float:
    return samples[(name, (("queue", queue),))]


def test_queue_gauges_are_the_newest_samples(client: TestClient) -> None:
    samples = scrape(client)
    for spec in QUEUES:
        assert queue_value(samples, "slotmap_queue_slots", spec.name) == spec.slots
        assert queue_value(samples, "slotmap_queue_slots_desired", spec.name) == spec.desired
        assert queue_value(samples, "slotmap_queue_load_ratio", spec.name) == pytest.approx(spec.load)
        assert queue_value(samples, "slotmap_queue_jobs_waiting", spec.name) == spec.waiting
        assert queue_value(samples, "slotmap_queue_jobs_locked", spec.name) == spec.running
        assert queue_value(samples, "slotmap_queue_jobs_delayed", spec.name) == spec.delayed
        assert queue_value(samples, "slotmap_queue_paused", spec.name) == float(spec.paused)
        assert queue_value(samples, "slotmap_queue_priority", spec.name) == spec.priority
    assert samples[("slotmap_data_age_seconds", ())] == pytest.approx(CLOCK - NOW)


def test_host_gauges_and_counters_and_the_slot_map_cells(client: TestClient) -> None:
    samples = scrape(client)
    rows = {row["host"]: row for row in admin_sample.host_rows(now=NOW, mapped=admin_sample.slot_map(now=NOW))}
    for host, row in rows.items():
        labels = (("host", str(host)),)
        assert samples[("slotmap_host_up", labels)] == float(bool(row["alive"]))
        assert samples[("slotmap_host_memory_total_bytes", labels)] == row["mem_total_bytes"]
        assert samples[("slotmap_host_avg_slot_bytes", labels)] == row["avg_slot_bytes"]
        assert samples[("slotmap_host_slots_recycled_for_memory_total", labels)] == row["recycled_for_memory"]
        assert samples[("slotmap_host_slots_killed_hung_total", labels)] == row["killed_hung"]
        assert samples[("slotmap_host_slots_recycled_for_jobs_total", labels)] == row["recycled_for_jobs"]
        assert samples[("slotmap_host_slots_recycled_for_age_total", labels)] == row["recycled_for_age"]
    for cell in admin_sample.slot_map(now=NOW):
        key = ("slotmap_slot_map_slots", (("host", str(cell["host"])), ("queue", str(cell["queue"]))))
        assert samples[key] == cell["slots"]


def stored_sum(engine: Engine, column: str, queue: str, *, since_unix: float = 0.0) -> float:
    with Session(engine) as session:
        return float(session.scalar(
            select(func.sum(getattr(QueueSample, column)))
            .where(QueueSample.queue == queue, QueueSample.at_unix >= since_unix)) or 0)


def stored_events(engine: Engine, kind: str, *, since_unix: float = 0.0) -> float:
    with Session(engine) as session:
        return float(session.scalar(
            select(func.count()).select_from(Event).where(Event.kind == kind, Event.at_unix >= since_unix)) or 0)


def test_a_dashboard_opened_after_the_work_counts_it_at_the_first_scrape(
    client: TestClient, engine: Engine,
) -> None:
    """The bug of issue 9: counters started at 0 at the first scrape, so 2,000 jobs done
    before anyone looked at /metrics read 0."""
    first = scrape(client)
    assert stored_sum(engine, "errors", "push_notify") > 0
    assert queue_value(first, "slotmap_queue_errors_total", "push_notify") == stored_sum(
        engine, "errors", "push_notify")
    assert first[("slotmap_events_total", (("kind", "slots_moved"),))] == stored_events(engine, "slots_moved")


def test_counters_hold_the_managers_run_so_far_and_add_up_the_samples_stored_since(
    client: TestClient, engine: Engine,
) -> None:
    active_at = NOW - 600
    with Session(engine) as session:
        session.add(Event(at_unix=active_at, kind="manager_active", actor="manager", message="m"))
        session.commit()
    first = scrape(client)
    errors = stored_sum(engine, "errors", "mail_send", since_unix=active_at)
    assert queue_value(first, "slotmap_queue_errors_total", "mail_send") == errors
    kind = (("kind", "slots_moved"),)
    moved = stored_events(engine, "slots_moved", since_unix=active_at)
    assert first[("slotmap_events_total", kind)] == moved
    with Session(engine) as session:
        newest = {**admin_sample.queue_rows(now=NOW + 5, history_s=0)[0], "jobs_done": 100, "errors": 2}
        assert newest["queue"] == "mail_send"
        session.execute(insert(QueueSample), [newest, {**newest, "at_unix": NOW + 10, "jobs_done": 50}])
        session.add(Event(at_unix=NOW + 5, kind="slots_moved", actor="manager", message="m"))
        session.add(Event(at_unix=NOW + 5, kind="brand_new_kind", actor="manager", message="m"))
        session.commit()
    second = scrape(client)
    assert queue_value(second, "slotmap_queue_errors_total", "mail_send") == errors + 4
    assert second[("slotmap_events_total", kind)] == moved + 1
    assert second[("slotmap_events_total", (("kind", "brand_new_kind"),))] == 1
    assert scrape(client) == second  # nothing new: the counters stay


def test_metrics_of_a_database_the_manager_has_not_created_are_empty_not_an_error(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with TestClient(create_app(Store(engine), AdminSettings(allowed_hosts=TEST_CLIENT_HOSTS))) as client:
        assert scrape(client) == {}
    engine.dispose()


def test_two_apps_in_one_process_keep_their_own_registries(engine: Engine) -> None:
    first = TestClient(create_app(Store(engine), AdminSettings(allowed_hosts=TEST_CLIENT_HOSTS)))
    second = TestClient(create_app(Store(engine), AdminSettings(allowed_hosts=TEST_CLIENT_HOSTS)))
    assert scrape(first).keys() == scrape(second).keys()


def test_slot_crashes_are_counted_by_queue_and_cause_from_the_crash_events(
    client: TestClient, engine: Engine,
) -> None:
    def crash_event(at: float, queue: str, causes: dict[str, int]) -> Event:
        return Event(at_unix=at, kind="slot_crashed", queue=queue, host="h1", actor="master",
                     message="m", detail={"count": sum(causes.values()), "causes": causes, "crashes": []})

    with Session(engine) as session:
        session.add(crash_event(NOW, "mail_send", {"exit_7": 3, "SIGKILL": 1}))
        session.commit()
    first = scrape(client)
    assert first[("slotmap_slot_crashes_total", (("cause", "exit_7"), ("queue", "mail_send")))] == 3
    assert first[("slotmap_slot_crashes_total", (("cause", "SIGKILL"), ("queue", "mail_send")))] == 1
    with Session(engine) as session:
        session.add(crash_event(NOW + 5, "mail_send", {"exit_7": 10}))
        session.add(crash_event(NOW + 5, "push_notify", {"hung": 1}))
        session.commit()
    second = scrape(client)
    assert second[("slotmap_slot_crashes_total", (("cause", "exit_7"), ("queue", "mail_send")))] == 13
    assert second[("slotmap_slot_crashes_total", (("cause", "hung"), ("queue", "push_notify")))] == 1
    assert scrape(client) == second
