"""The batch size in force and the rate limiter's figures, from the masters' reports and the
pulsar to the dashboard's views: pure rules, the manager's rows, a real pulsar over ZeroMQ."""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import text

from admin_ui import views
from admin_ui.limiters import LimiterReader, Readout, limiter_status
from admin_ui.limiters_shown import queue_limiters
from admin_ui.settings import AdminSettings
from config.load import parse_config
from config.models import QueueConfig, RateLimitConfig
from manager.storage.db import make_engine
from manager.storage.model import Plan, QueuePlan, SlotMap
from manager.storage.samples import queue_samples
from manager.storage.stats import settings_in_force, with_batch_sizes
from manager.storage.store import MIGRATIONS_DIR, Store
from manager.storage.store_reads import reading
from master.report import HostReport, QueueSettingsReport
from slot.pulsar.client import PermitClient
from slot.pulsar.protocol import LimiterView
from slot.pulsar.service import PulsarService

FIVE = QueueSettingsReport(batch_size=5, batch_size_source="handler", handler="app.Thumbs")
EIGHT = QueueSettingsReport(batch_size=8, batch_size_source="config", handler="app.Thumbs")


def host_report(host: str, settings: dict[str, QueueSettingsReport]) -> HostReport:
    return HostReport(
        host=host, master_pid=1, sent_at_unix=0.0, capacity=2, capacity_by_memory=2,
        capacity_by_load=2, max_slots=2, avg_slot_bytes=0, master_pss_bytes=0, slots_pss_bytes=0,
        slots_measured=0, mem_available_bytes=0, load_avg_1m=0.0, cpus=2, slots=[],
        queue_settings=settings,
    )


def test_the_settings_most_hosts_use_are_the_queues_settings_in_force() -> None:
    reports = [host_report("a", {"thumbs": FIVE}), host_report("b", {"thumbs": EIGHT, "mail": EIGHT}),
               host_report("c", {"thumbs": EIGHT})]
    assert settings_in_force(reports) == {"mail": EIGHT, "thumbs": EIGHT}
    # A tie (a rolling deploy half done) settles on the smaller batch, whatever the order.
    assert settings_in_force(reports[:2])["thumbs"] == FIVE
    assert settings_in_force(reports[1::-1])["thumbs"] == FIVE
    assert settings_in_force([]) == {}


def test_the_planner_gets_the_batch_size_the_slots_use() -> None:
    queues = parse_config({"queues": {"thumbs": {"priority": 2}, "idle": {}}}).queues
    planned = with_batch_sizes(queues, {"thumbs": FIVE})
    assert (planned["thumbs"].batch_size, planned["thumbs"].priority) == (5, 2)
    assert planned["idle"] is queues["idle"]


def test_a_host_report_carries_the_settings_in_force_through_its_frame() -> None:
    sent = host_report("a", {"thumbs": FIVE})
    assert HostReport.decode(sent.encode()).queue_settings == {"thumbs": FIVE}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'slotmap.db'}")
    yield opened
    opened.close()


def test_the_dashboard_shows_the_batch_size_the_manager_stored_with_its_source(store: Store) -> None:
    plan = Plan(slot_map=SlotMap.empty(), moves=(), queues={
        name: QueuePlan(name, 0, 0.0, 0.0, 0, 0, 0) for name in ("thumbs", "mail", "orphan")
    })
    config = parse_config({"queues": {"thumbs": {}, "mail": {"batch_size": 8}, "orphan": {}}}).queues
    store.write(queue_samples(
        at_unix=100.0, plan=plan, queues=config, paused=[], window={}, window_s=10.0, interval={},
        interval_s=1.0, server={}, in_force={"thumbs": FIVE, "mail": EIGHT},
    ))
    with reading(store) as reads:
        rows = {row.queue: row for row in views.queues_view(reads, now=101.0, forget_after_s=60.0).queues}
        thumbs = views.queue_detail(reads, "thumbs", now=101.0, config=config["thumbs"])
        mail = views.queue_detail(reads, "mail", now=101.0, config=config["mail"])
    assert (rows["thumbs"].batch_size, rows["thumbs"].batch_size_source) == (5, "handler")
    assert (rows["mail"].batch_size, rows["mail"].batch_size_source) == (8, "config")
    assert (rows["orphan"].batch_size, rows["orphan"].batch_size_source) == (None, None)
    # The config's default 10 is not shown as if it were in force.
    assert thumbs is not None and thumbs.config is not None and thumbs.config.batch_size is None
    assert mail is not None and mail.config is not None and mail.config.batch_size == 8


RATED = QueueConfig(rate_limit=RateLimitConfig(permits=10, period_s=2.0))
VIEW = LimiterView(configured_per_s=5.0, current_per_s=2.5, capacity=5.0, tokens=1.0, paused_for_s=0.0,
                   granted_total=42, cuts=1, pauses=0)


def test_a_limiter_status_names_the_queue_and_says_why_figures_are_missing() -> None:
    assert limiter_status("q", QueueConfig(), Readout({"q": VIEW})) is None
    assert limiter_status("q", None, Readout({"q": VIEW})) is None
    shown = limiter_status("q", RATED, Readout({"q": VIEW}))
    assert shown is not None
    assert (shown.name, shown.configured_per_s, shown.current_per_s, shown.granted_total, shown.cuts) == (
        "q", 5.0, 2.5, 42, 1)
    down = limiter_status("q", RATED, Readout({}, "the pulsar did not answer"))
    assert down is not None and not down.reachable and down.current_per_s is None
    assert down.error == "the pulsar did not answer"
    other = limiter_status("q", RATED, Readout({"r": VIEW}))
    assert other is not None and other.reachable and "no limiter 'q'" in (other.error or "")


def test_the_pulsar_is_asked_once_for_every_rate_limited_queue_and_not_without_one() -> None:
    class Counting(LimiterReader):
        reads = 0

        def read(self) -> Readout:
            Counting.reads += 1
            return Readout({"q": VIEW})

    reader = Counting(free_endpoint())
    assert queue_limiters(AdminSettings(queues={"plain": QueueConfig()}, limiters=reader)) == {}
    assert Counting.reads == 0
    shown = queue_limiters(AdminSettings(queues={"q": RATED, "r": RATED, "plain": QueueConfig()}, limiters=reader))
    assert Counting.reads == 1 and sorted(shown) == ["q", "r"]
    assert shown["q"].granted_total == 42 and shown["r"].error is not None
    reader.close()


def free_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def test_a_pulsar_that_does_not_answer_is_a_message_within_a_second() -> None:
    reader = LimiterReader(free_endpoint(), reply_timeout_s=0.3)
    try:
        started = time.monotonic()
        readout = reader.read()
        elapsed_s = time.monotonic() - started
    finally:
        reader.close()
    assert readout.limiters == {} and readout.error is not None
    assert "did not answer within 0.3 s" in readout.error
    assert elapsed_s < 5.0  # bounded by the reply timeout, with room for a busy machine


def test_the_reader_gets_a_real_pulsars_granted_permits() -> None:
    endpoint = free_endpoint()
    service = PulsarService(endpoint, {"q": RateLimitConfig(permits=100, period_s=1.0)})
    stopping = threading.Event()
    pulsar = threading.Thread(target=service.run_until, args=(stopping.is_set,), daemon=True)
    pulsar.start()
    reader = LimiterReader(endpoint, reply_timeout_s=10.0)  # room for a busy machine: 2 s was little
    try:
        with PermitClient(endpoint) as client:
            client.acquire("q", 3, timeout_s=10.0)
        readout = reader.read()
    finally:
        reader.close()
        stopping.set()
        pulsar.join(timeout=5)
        service.close()
    assert readout.error is None
    status = limiter_status("q", QueueConfig(rate_limit=RateLimitConfig(permits=100)), readout)
    assert status is not None and status.granted_total == 3 and status.configured_per_s == 100.0


def test_a_database_of_the_first_schema_is_upgraded_with_its_samples_kept(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.connect() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        connection.execute(text(
            "INSERT INTO queue_samples (at_unix, queue, priority, min_slots, max_slots, slots_current, "
            "slots_avg, slots_desired, load, waiting, running, delayed, jobs_done, jobs_per_s, "
            "mean_job_s, errors, paused) VALUES (100, 'old', 0, 0, 1, 1, 1, 1, 0.5, 3, 0, 0, 2, 1, 0.1, 0, 0)"
        ))
        connection.commit()
    engine.dispose()
    upgraded = Store.open(url)
    try:
        with reading(upgraded) as reads:
            [row] = views.queues_view(reads, now=101.0, forget_after_s=60.0).queues
    finally:
        upgraded.close()
    assert (row.queue, row.waiting, row.batch_size, row.batch_size_source) == ("old", 3, None, None)
