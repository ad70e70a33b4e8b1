"""Out-of-bounds values from a peer at the manager's master door, through real ZeroMQ (issue 16).

A rogue DEALER sends host reports written by hand (NaN, infinities, 400-digit integers,
hostile names, thousands of queues, thousands of hosts) while an honest one reports as a
master would. Each bad frame must be refused where it enters, logged at a bounded rate and
counted (a `peer_refused` event), the rogue host never joins, and the plans go on: the
honest host gets its part of the map. On main f5016ee a NaN `busy_s` failed every plan.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile_peer import RawMaster, master_frame, report_dict, rss_bytes
from polling import DEADLINE_S
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from test_service_procs import Cluster, Proc, WarmClusters, poll_until

from manager.storage.db import HostSample, make_engine
from manager.storage.store import EventKind

# How often the two peers send: the test's heartbeat (0.25 s) and a bit faster.
SEND_EVERY_S = 0.1
PLANNED_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def warm_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmClusters]:
    # Two ahead: a test here is two peers' frames, lighter than a manager's start.
    yield from WarmClusters.for_module(tmp_path_factory.mktemp("door_values"), {"q": {"max_slots": 4}},
                                       ahead=2)


@pytest.fixture
def cluster(warm_clusters: WarmClusters, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A queue server and a manager of its own for each test, started during the one before."""
    yield from warm_clusters.one(request)


# Each builder takes the report's sequence number: the slot's jobs_done grows with it, so
# the manager sees work done between reports (with none, a NaN busy_s was never divided).
Build = Callable[[int], dict[str, Any]]


def _with(**changes: Any) -> Build:
    return lambda n: report_dict("rogue", jobs_done=n, **changes)


def _set(key: str, value: Any) -> Build:
    def build(n: int) -> dict[str, Any]:
        report = report_dict("rogue", jobs_done=n)
        report[key] = value
        return report
    return build


BAD_REPORTS: dict[str, Build] = {
    "NaN busy_s": _with(busy_s=float("nan")),
    "infinite busy_s": _with(busy_s=float("inf")),
    "busy_s of 1e300": _with(busy_s=1e300),
    "a 400-digit capacity": _with(capacity=10**400),
    "a negative capacity": _with(capacity=-5),
    "a hostile host name": lambda n: report_dict('"><img src=x onerror=alert(1)>', jobs_done=n),
    "a hostile queue name": _with(queue='q"><script>alert(1)</script>'),
    "5,000 unhandled queues": _set("unhandled_queues", [f"q{i}" for i in range(5000)]),
    "a 10,000-character handler failure": _set("handler_failures", {"handlers": "x" * 10_000}),
    "NaN load average": _set("load_avg_1m", float("nan")),
}


def honest_planned(cluster: Cluster, manager: Proc, honest: RawMaster, rogue: RawMaster,
                   bad: Build) -> dict[str, str]:
    """Both peers keep sending until a plan names the honest host (the rogue's frames meanwhile)."""
    sent = iter(range(1, 1_000_000))

    def probe() -> dict[str, str] | None:
        assert manager.alive(), cluster.logs()
        n = next(sent)
        honest.send(master_frame(report_dict("honest", pid=5151, jobs_done=n)))
        rogue.send(master_frame(bad(n)))
        time.sleep(SEND_EVERY_S)  # paces the senders (a master reports every heartbeat)
        return honest.planned_slots()

    return poll_until(probe, PLANNED_WITHIN_S,
                      what=lambda: f"a plan naming the honest host\n{cluster.logs()}")


@pytest.mark.parametrize("case", list(BAD_REPORTS))
def test_a_report_out_of_bounds_is_refused_counted_and_the_plans_go_on(cluster: Cluster, case: str) -> None:
    manager = cluster.start_manager()
    honest, rogue = RawMaster(cluster.manager_endpoint), RawMaster(cluster.manager_endpoint)
    try:
        bad = BAD_REPORTS[case]
        slots = honest_planned(cluster, manager, honest, rogue, bad)
        # A second plan after it, the rogue still sending: planning keeps working.
        honest_planned(cluster, manager, honest, rogue, bad)
    finally:
        honest.close()
        rogue.close()
    assert slots, cluster.logs()
    log = manager.log_text()
    assert "planning failed" not in log, manager.log_tail()
    assert "frames on the master link (a frame that does not decode or is out of bounds" in log \
        or "frame on the master link (a frame that does not decode or is out of bounds" in log, manager.log_tail()
    joined = {event.host for event in cluster.events(EventKind.MASTER_JOINED)}
    assert joined == {"honest"}, joined
    poll_until(lambda: cluster.events(EventKind.PEER_REFUSED), DEADLINE_S,
               what=lambda: f"a peer_refused event\n{cluster.logs()}")


def test_refusals_are_logged_at_a_bounded_rate(cluster: Cluster) -> None:
    """A flood of bad frames: every one counted, one line per reason every 10 s, not one each."""
    manager = cluster.start_manager()
    rogue = RawMaster(cluster.manager_endpoint)
    bad = master_frame(report_dict("rogue", busy_s=float("nan")))
    try:
        for _ in range(2000):
            rogue.send(bad)
        poll_until(lambda: "refused" in manager.log_text(), 20.0, what=lambda: manager.log_tail())
    finally:
        rogue.close()
    lines = [line for line in manager.log_text().splitlines() if "on the master link" in line]
    assert 1 <= len(lines) <= 3, lines


def test_a_rogue_announcing_5000_hosts_is_held_to_max_hosts(tmp_path: Path) -> None:
    """Hosts stay alive through the burst (liveness 40 heartbeats): the first max_hosts are
    taken, the rest refused; the manager's memory and every plan's host rows stay bounded."""
    max_hosts = 100
    cluster = Cluster.create(tmp_path, {"q": {}}, max_hosts=max_hosts, heartbeat_liveness=40)
    cluster.start_queue_server()
    rogue = RawMaster(cluster.manager_endpoint)
    try:
        manager = cluster.start_manager()
        poll_until(lambda: "for masters" in manager.log_text(), 20.0, what=lambda: cluster.logs())
        before = rss_bytes(manager.pid)
        started = time.monotonic()
        for i in range(5000):
            rogue.send(master_frame(report_dict(f"rogue-{i}", pid=10_000 + i)))
        poll_until(lambda: f"past [manager] max_hosts {max_hosts}" in manager.log_text(), 30.0,
                   what=lambda: cluster.logs())
        # Two plans after the burst (plans write each known host's row).
        poll_until(lambda: len(_host_rows_per_plan(cluster)) >= 2, 30.0, what=lambda: cluster.logs())
        after = rss_bytes(manager.pid)
        print(f"5,000 hosts sent in {time.monotonic() - started:.1f} s; manager RSS "
              f"{before / 2**20:.0f} -> {after / 2**20:.0f} MiB")
        joined = cluster.events(EventKind.MASTER_JOINED)
        assert len(joined) == max_hosts, len(joined)
        assert max(_host_rows_per_plan(cluster).values()) <= max_hosts
        assert after - before < 40 * 2**20, (before, after)
        assert cluster.events(EventKind.PEER_REFUSED)
        assert manager.alive()
    finally:
        rogue.close()
        cluster.close()


def _host_rows_per_plan(cluster: Cluster) -> dict[float, int]:
    engine = make_engine(cluster.database_url)
    try:
        with Session(engine) as session:
            rows = session.execute(select(HostSample.at_unix, func.count()).group_by(HostSample.at_unix))
            return {at: count for at, count in rows}
    finally:
        engine.dispose()
