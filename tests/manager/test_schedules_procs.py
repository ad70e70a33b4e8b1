"""Periodic jobs with real managers, a real queue server and a real database: each tick exists
exactly once as a job across kill -9 failovers, and the catch-up policies after an outage."""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_service_procs import Cluster, Proc, poll_until
from test_store import database_url  # noqa: F401  (the fixture)

from manager.failover.leader import try_acquire
from manager.schedules.ticks import MISFIRE_GRACE_S
from queue_server.client import QueueClient

# Issue 18: the active manager killed "several times over 30 s". Five kills as there were
# (30 s / 6 s): a count, not a span. A kill waits for what it needs, not for a clock: the
# active manager has fired a tick of its own (every 1 s) and the next one stands by (it
# had time to start, about a second). Kills every 2.5 s took 12.5 s; these take about 7.
KILLS = 5
# A manager comes up (imports, migrations, the lock) in about a second; a loaded CI box is slower.
ACTIVE_DEADLINE_S = 30.0
OUTAGE_S = 10.0
KEY = re.compile(r"^(?P<name>[^@]+)@(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$")


def tick_of(key: str) -> float:
    found = KEY.match(key)
    assert found is not None, f"not a tick key: {key}"
    return datetime.strptime(found["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def job_keys(address: str, queue: str) -> list[str]:
    keys: list[str] = []
    with QueueClient(address) as client:
        after = None
        while True:
            page = client.jobs(queue, "ready", limit=1000, after=after)
            keys += [job.key for job in page]
            if len(page) < 1000:
                return keys
            after = page[-1].key


def wait_active(cluster: Cluster, manager: Proc) -> None:
    poll_until(lambda: "active manager" in manager.log_text(), timeout_s=ACTIVE_DEADLINE_S,
               what=lambda: f"{manager.name} active\n{cluster.logs()}")


def wait_standing_by(cluster: Cluster, manager: Proc) -> None:
    poll_until(lambda: "standing by" in manager.log_text(), timeout_s=ACTIVE_DEADLINE_S,
               what=lambda: f"{manager.name} standing by\n{cluster.logs()}")


def wait_for_tick_after(cluster: Cluster, queue: str, moment: float) -> None:
    address = cluster.queue_server.address
    poll_until(lambda: any(tick_of(key) >= moment for key in job_keys(address, queue)),
               timeout_s=ACTIVE_DEADLINE_S, what=lambda: f"a tick of {queue} after {moment}\n{cluster.logs()}")


@pytest.fixture
def cluster(tmp_path: Path, database_url: str) -> Iterator[Cluster]:  # noqa: F811
    started = Cluster.create(tmp_path, {"ticks": {}, "skipped": {}, "caught": {}}, database_url=database_url)
    started.start_queue_server()
    yield started
    started.close()


def test_every_tick_exists_exactly_once_across_kill_9_failovers(cluster: Cluster) -> None:
    cluster.extra_sections = {"schedules.every_second": {"every_s": 1.0, "queue": "ticks", "catch_up": "all"}}
    active = cluster.start_manager("manager-0")
    wait_active(cluster, active)
    active_from = time.time()
    standby = cluster.start_manager("manager-1", standby=True)
    first_kill_at = 0.0
    for kills in range(1, KILLS + 1):
        # Every active manager fires a tick of its own before its kill (a tick at or after it
        # became active: the only active one fired it), and hands over to a ready standby.
        wait_for_tick_after(cluster, "ticks", active_from)
        wait_standing_by(cluster, standby)
        active.kill_group()
        first_kill_at = first_kill_at or time.time()
        wait_active(cluster, standby)
        active_from = time.time()
        active, standby = standby, cluster.start_manager(f"manager-{kills + 1}", standby=True)
    ended = time.time()
    wait_for_tick_after(cluster, "ticks", ended + 1)
    keys = job_keys(cluster.queue_server.address, "ticks")
    ticks = sorted(tick_of(key) for key in keys)
    assert len(ticks) == len(set(ticks)), "a tick was put twice"
    assert all(key.startswith("every_second@") for key in keys)
    first, last = ticks[0], ticks[-1]
    missing = sorted(set(range(int(first), int(last) + 1)) - {int(t) for t in ticks})
    assert not missing, f"ticks never fired across {kills} failovers: {missing}\n{cluster.logs()}"
    # The span covers every kill: the first tick came before the first kill, the last after the end.
    assert first < first_kill_at and last >= ended


def test_after_a_ten_second_outage_skip_fires_none_of_the_missed_ticks_and_all_fires_each(
    cluster: Cluster,
) -> None:
    cluster.extra_sections = {
        "schedules.skip_them": {"every_s": 1.0, "queue": "skipped", "catch_up": "skip"},
        "schedules.all_of_them": {"every_s": 1.0, "queue": "caught", "catch_up": "all"},
    }
    first = cluster.start_manager("manager-0")
    wait_active(cluster, first)
    wait_for_tick_after(cluster, "skipped", time.time())
    first.kill_group()
    killed_at = time.time()
    # The next manager starts (imports, a second or more) during the outage, as a standby: the
    # test holds the lease, so nothing is active until it lets go. A manager does nothing
    # before it holds the lease (manager/cli.py), so it comes back as a fresh one would.
    lease = poll_until(lambda: try_acquire(cluster.database_url), timeout_s=ACTIVE_DEADLINE_S,
                       what="the killed manager's lease")
    try:
        second = cluster.start_manager("manager-1", standby=True)
        # The outage itself: no active manager for OUTAGE_S (a span of time, not a condition).
        time.sleep(max(0.0, killed_at + OUTAGE_S - time.time()))
        assert "active manager" not in second.log_text(), cluster.logs()
    finally:
        lease.release()
    restarted_at = time.time()
    wait_active(cluster, second)
    # A tick at or after the restart is the second manager's; the pass that put it had
    # caught up (or passed over) the missed ones first, their events written before its PUT.
    wait_for_tick_after(cluster, "skipped", restarted_at)
    wait_for_tick_after(cluster, "caught", restarted_at)
    address = cluster.queue_server.address
    skipped = {int(tick_of(key)) for key in job_keys(address, "skipped")}
    caught = sorted(int(tick_of(key)) for key in job_keys(address, "caught"))
    missed_span = set(range(int(killed_at) + 2, int(restarted_at - MISFIRE_GRACE_S)))
    assert len(missed_span) >= 3
    assert not missed_span & skipped, f"skip fired missed ticks {sorted(missed_span & skipped)}"
    assert set(range(caught[0], caught[-1] + 1)) == set(caught), "all left a tick out"
    assert missed_span <= set(caught)
    kinds = {(event.kind, (event.detail or {}).get("schedule")) for event in cluster.events()}
    assert ("schedule_ticks_missed", "skip_them") in kinds
    assert ("schedule_caught_up", "all_of_them") in kinds
