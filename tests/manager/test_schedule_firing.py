"""One pass of the firing thread against a real queue server and a real SQLite database: a tick
left in flight is put again as the same job, run now puts a manual job once, a pause skips ticks
without catching them up at resume."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import poll_until, server_proc
from sqlalchemy import text

from config.schedules import ScheduleConfig
from manager.schedules.admin import act
from manager.schedules.firing import Firing, FiringThread, Job
from manager.schedules.state import ScheduleStates
from manager.storage.store import NewEvent, Store
from queue_server.client import QueueClient

RULES = {"tick": ScheduleConfig(every_s=10, queue="ticks", data="hello", catch_up="all")}


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[tuple[Firing, Store, QueueClient]]:
    server = server_proc.start_queue_server(tmp_path, "--fsync", "never")
    store = Store.open(f"sqlite:///{tmp_path / 'slotmap.db'}")
    client = QueueClient(server.address)
    events: list[NewEvent] = []

    def put(job: Job) -> None:
        client.put(job.queue, job.data, priority=job.priority, key=job.key)

    firing = Firing(RULES, states=ScheduleStates(store.engine), put=put,
                    note=lambda at, event: events.append(event))
    yield firing, store, client
    client.close()
    store.close()
    server.kill()


def keys(client: QueueClient) -> list[str]:
    return sorted(job.key for job in client.jobs("ticks", "ready"))


def test_a_new_schedule_fires_its_next_tick_and_a_tick_in_flight_is_the_same_job_again(
    parts: tuple[Firing, Store, QueueClient],
) -> None:
    firing, store, client = parts
    firing.step(1000.5)                     # first sight: starts from now
    firing.step(1010.2)
    assert keys(client) == ["tick@1970-01-01T00:16:50Z"]
    states = ScheduleStates(store.engine)
    # A manager died between the PUT and its record: the successor puts the same key again.
    states.begin_fire("tick", 1_010_000, now_unix=1010.3)
    firing.step(1010.4)
    assert keys(client) == ["tick@1970-01-01T00:16:50Z"]
    assert states.get("tick").in_flight_ms is None


def test_run_now_puts_one_manual_job_and_a_pause_skips_ticks_for_good(
    parts: tuple[Firing, Store, QueueClient],
) -> None:
    firing, store, client = parts
    firing.step(1000.5)
    act(store, RULES, "tick", "run", door="cli", now_unix=1001.25)
    firing.step(1001.5)
    firing.step(1001.7)
    assert keys(client) == ["tick@manual-1970-01-01T00:16:41.250Z"]
    act(store, RULES, "tick", "pause", door="cli", now_unix=1002.0)
    firing.step(1035.0)
    act(store, RULES, "tick", "resume", door="cli", now_unix=1036.0)
    firing.step(1036.5)
    firing.step(1040.1)
    # catch_up = "all", yet the ticks of the pause (1010, 1020, 1030) were skipped, not caught up.
    assert keys(client) == ["tick@1970-01-01T00:17:20Z", "tick@manual-1970-01-01T00:16:41.250Z"]


def test_a_database_outage_fails_passes_with_one_traceback_and_the_schedule_fires_after_it(
    parts: tuple[Firing, Store, QueueClient], caplog: pytest.LogCaptureFixture,
) -> None:
    """Before the audit branch: a traceback every pass (4 a second) while the outage lasted."""
    caplog.set_level(logging.INFO, logger="manager.schedules.firing")
    firing, store, client = parts
    firing.rules = {"tick": ScheduleConfig(every_s=1, queue="ticks", data="hello")}
    with store.engine.begin() as connection:  # the table gone: every pass fails, for real
        connection.execute(text("ALTER TABLE schedules RENAME TO schedules_away"))
    thread = FiringThread(firing)
    thread.start()
    try:
        poll_until(lambda: firing.turns.failures >= 3, what=lambda: f"passes failing\n{caplog.text}")
        with store.engine.begin() as connection:
            connection.execute(text("ALTER TABLE schedules_away RENAME TO schedules"))
        # A client of its own: the firing thread uses the fixture's.
        host, port = client.addresses[0]
        with QueueClient(f"{host}:{port}") as reader:
            poll_until(lambda: keys(reader), what=lambda: f"a tick put after the outage\n{caplog.text}")
    finally:
        thread.stop()
    messages = [r.getMessage() for r in caplog.records]
    failed = [m for m in messages if m.startswith("the schedule pass failed (OperationalError: ")]
    assert len(failed) == 1 and "no such table: schedules" in failed[0], messages
    assert any(m.startswith("the schedule pass works again after ") for m in messages), messages
