"""History in SQL: migrations on empty databases, rows per plan, overrides, retention.

SQLite always; PostgreSQL too when SLOTMAP_TEST_PG gives a DSN (each test gets a schema
of its own, dropped afterwards).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from procs import pg_schema
from sqlalchemy import func, inspect, select, text
from sqlalchemy.orm import Session
from test_service_stats import report, slot

from config.models import QueueConfig
from manager.storage.db import (
    Base,
    Event,
    HostSample,
    QueueOverride,
    QueueSample,
    SlotMapRow,
    make_engine,
)
from manager.storage.model import Plan, QueuePlan, SlotMap
from manager.storage.samples import host_samples, queue_samples, slot_map_rows
from manager.storage.stats import Totals
from manager.storage.store import EventKind, NewEvent, Store, event_row, sqlite_path
from queue_server.protocol.replies import QueueStats as ServerQueueStats

PG_DSN = os.environ.get("SLOTMAP_TEST_PG")
DAY_S = 86400.0


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'var' / 'slotmap.db'}"
        return
    if not PG_DSN:
        pytest.skip("PostgreSQL not tested: set SLOTMAP_TEST_PG=postgresql+psycopg://user@host:port/db")
    with pg_schema(PG_DSN, "slotmap_test") as url:
        yield url


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()


def test_migrations_build_exactly_the_tables_of_the_models_on_an_empty_database(store: Store) -> None:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
        assert context.get_current_revision() == "0012"
    assert set(inspect(store.engine).get_table_names()) >= {
        "queue_samples", "host_samples", "slot_map", "events", "queue_overrides", "alembic_version",
        "schedules", "queue_authority",
    }


def test_a_second_upgrade_of_a_migrated_database_changes_nothing(database_url: str) -> None:
    Store.open(database_url).close()
    again = Store.open(database_url)
    with again.engine.connect() as connection:
        assert MigrationContext.configure(connection).get_current_revision() == "0012"
    again.close()


def test_the_sqlite_folder_is_created_and_in_memory_urls_have_no_file(tmp_path: Path) -> None:
    assert sqlite_path("sqlite:///./var/x.db") == Path("./var/x.db")
    assert sqlite_path("sqlite://") is None and sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path("postgresql+psycopg://u@h/db") is None
    Store.open(f"sqlite:///{tmp_path / 'deep' / 'er' / 'x.db'}").close()
    assert (tmp_path / "deep" / "er" / "x.db").exists()


def test_one_plan_writes_queue_host_and_slot_map_rows_with_its_events(store: Store) -> None:
    plan = Plan(
        slot_map=SlotMap(hosts={"a": {"a:1": "q", "a:2": "q", "a:3": "r"}}),
        queues={
            "q": QueuePlan("q", 1, float("inf"), 3.0, 2, 2, 2),
            "r": QueuePlan("r", 0, 0.5, 1.0, 1, 1, 1),
        },
        moves=(),
    )
    rows: list[object] = []
    rows += queue_samples(
        at_unix=100.0, plan=plan, queues={"q": QueueConfig(priority=1), "r": QueueConfig()},
        paused=["r"], window={"q": Totals(jobs_done=10, busy_s=5.0, errors=1, slot_s=20.0)},
        window_s=10.0, interval={"q": Totals(jobs_done=4, errors=1)}, interval_s=2.0,
        server={"q": ServerQueueStats("q", 7, 1, 2, 0, 0, 0, 0, {}, None)},
    )
    rows += host_samples(at_unix=100.0, reports=[(report("a", [slot(1, "q")]), True),
                                                   (report("b", [slot(1, "q")]), False)])
    rows += slot_map_rows(at_unix=100.0, slot_map=plan.slot_map)
    rows.append(event_row(100.0, NewEvent(EventKind.SLOTS_MOVED, "moved", detail={"n": 1})))
    store.write(rows)
    with Session(store.engine) as session:
        q, r = session.scalars(select(QueueSample).order_by(QueueSample.queue)).all()
        assert (q.waiting, q.running, q.delayed, q.jobs_done, q.jobs_per_s, q.errors) == (7, 2, 1, 4, 2.0, 1)
        assert (q.slots_avg, q.mean_job_s, q.load, q.paused) == (2.0, 0.5, 1e6, False)
        assert (r.paused, r.waiting, r.jobs_done) == (True, 0, 0)
        hosts = session.scalars(select(HostSample).order_by(HostSample.host)).all()
        assert [(h.host, h.alive, h.slots, h.capacity) for h in hosts] == [("a", True, 1, 8), ("b", False, 0, 0)]
        assert {(m.queue, m.slots) for m in session.scalars(select(SlotMapRow))} == {("q", 2), ("r", 1)}
        [event] = session.scalars(select(Event)).all()
        assert (event.kind, event.detail, event.actor) == ("slots_moved", {"n": 1}, "manager")


def test_overrides_written_by_the_dashboard_are_read_back(store: Store) -> None:
    with Session(store.engine) as session, session.begin():
        session.add(QueueOverride(queue="q", paused=True, updated_at_unix=5.0))
        session.add(QueueOverride(queue="r", paused=False, min_slots=2, max_slots=4, updated_at_unix=6.0))
    overrides = store.overrides()
    assert overrides["q"].paused and overrides["q"].min_slots is None
    assert (overrides["r"].min_slots, overrides["r"].max_slots) == (2, 4)


def test_retention_deletes_history_older_than_the_bound_and_keeps_overrides(store: Store) -> None:
    now = 100 * DAY_S
    rows: list[object] = []
    for age_days in (10.0, 7.5, 6.9, 0.0):
        at = now - age_days * DAY_S
        rows += slot_map_rows(at_unix=at, slot_map=SlotMap(hosts={"a": {"a:1": "q"}}))
        rows.append(event_row(at, NewEvent(EventKind.MASTER_LOST, "lost")))
        rows += host_samples(at_unix=at, reports=[(report("a", []), True)])
    rows.append(QueueOverride(queue="q", paused=True, updated_at_unix=0.0))
    store.write(rows)
    assert store.prune(now_unix=now, retention_days=7.0) == 6
    with Session(store.engine) as session:
        for table in (SlotMapRow, Event, HostSample):
            ages = sorted(round((now - at) / DAY_S, 1) for at in session.scalars(select(table.at_unix)))
            assert ages == [0.0, 6.9]
        assert session.scalar(select(func.count()).select_from(QueueOverride)) == 1


def test_the_hosts_alive_in_the_last_samples_are_what_a_new_manager_waits_for(store: Store) -> None:
    assert store.recent_hosts() == set()
    store.write(host_samples(at_unix=1.0, reports=[(report("old", []), True)]))
    store.write(host_samples(at_unix=2.0, reports=[(report("a", []), True), (report("b", []), True),
                                                    (report("dead", []), False)]))
    assert store.recent_hosts() == {"a", "b"}


def test_processes_opening_a_new_sqlite_database_at_once_all_get_it(tmp_path: Path) -> None:
    # The manager and a reader (the dashboard, a test) opening a new file together: both
    # switch it to WAL, and SQLite answered one "database is locked" at once, busy timeout
    # or not (16% of such runs here); that manager exited at start.
    failures: list[BaseException] = []

    def open_and_write(path: Path) -> None:
        try:
            engine = make_engine(f"sqlite:///{path}")
            with engine.connect() as connection:
                connection.execute(text("CREATE TABLE IF NOT EXISTS t (x INTEGER)"))
                connection.commit()
            engine.dispose()
        except Exception as exc:
            failures.append(exc)

    for run in range(60):
        threads = [threading.Thread(target=open_and_write, args=(tmp_path / f"{run}.db",))
                   for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []


def test_each_queue_s_newest_measured_job_time_is_what_a_new_manager_remembers(store: Store) -> None:
    def sample(queue: str, at: float, jobs_done: int, mean_job_s: float) -> QueueSample:
        return QueueSample(at_unix=at, queue=queue, priority=0, min_slots=0, max_slots=1,
                           slots_current=1, slots_avg=1.0, slots_desired=1, load=0.0, waiting=0,
                           running=0, delayed=0, jobs_done=jobs_done, jobs_per_s=0.0,
                           mean_job_s=mean_job_s, errors=0)

    assert store.last_job_times() == {}
    # A later idle interval (no job done) does not hide the last measured time.
    store.write([sample("q", 1.0, 10, 0.5), sample("q", 2.0, 4, 0.25), sample("q", 3.0, 0, 0.0),
                 sample("never", 2.0, 0, 0.0)])
    assert store.last_job_times() == {"q": 0.25}
