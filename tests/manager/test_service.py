"""The manager and masters end to end: real processes, ZeroMQ, queue server and SQLite."""
from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import psutil
import pytest
from polling import DEADLINE_S
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from test_service_procs import (
    HEARTBEAT_S,
    LIVENESS,
    Cluster,
    Proc,
    WarmClusters,
    poll_until,
    wait_running,
)

from manager.storage.db import QueueOverride, QueueSample, SlotMapRow, make_engine
from queue_server.client import QueueClient

QUEUES = {
    "demo_noop": {"min_slots": 2, "max_slots": 2},
    "demo_resize": {"min_slots": 1, "max_slots": 1, "priority": 1},
    "demo_echo": {"max_slots": 0},
    "demo_flaky": {"max_slots": 0},
}


@pytest.fixture(scope="module")
def warm_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmClusters]:
    yield from WarmClusters.for_module(tmp_path_factory.mktemp("service"), QUEUES)


@pytest.fixture
def cluster(warm_clusters: WarmClusters, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A queue server and a manager of its own for each test, started during the ones before."""
    yield from warm_clusters.one(request)


def test_a_master_runs_the_slots_the_manager_plans_and_jobs_get_done(cluster: Cluster) -> None:
    cluster.start_manager()
    master = cluster.start_master("alpha")
    wait_running(master, cluster, {"demo_noop": 2, "demo_resize": 1})
    with QueueClient(cluster.queue_server.address) as client:
        client.put_many("demo_noop", [b"x"] * 50)
        poll_until(lambda: client.stats().get("demo_noop") and client.stats()["demo_noop"].done == 50,
                   what="50 demo_noop jobs done")
    engine = make_engine(cluster.database_url)
    with Session(engine) as session:
        latest = session.scalar(select(func.max(SlotMapRow.at_unix)))
        rows = session.scalars(select(SlotMapRow).where(SlotMapRow.at_unix == latest)).all()
        assert {(r.host, r.queue): r.slots for r in rows} == {
            ("alpha", "demo_noop"): 2, ("alpha", "demo_resize"): 1,
        }
    poll_until(lambda: _jobs_recorded(engine, "demo_noop") == 50, what="50 jobs in queue samples")
    engine.dispose()
    assert [e.host for e in cluster.events("master_joined")] == ["alpha"]


def test_a_paused_queue_loses_its_slots_at_the_next_plan(cluster: Cluster) -> None:
    cluster.start_manager()
    master = cluster.start_master("alpha")
    wait_running(master, cluster, {"demo_noop": 2, "demo_resize": 1})
    engine = make_engine(cluster.database_url)
    with Session(engine) as session, session.begin():
        session.add(QueueOverride(queue="demo_resize", paused=True, updated_at_unix=1.0))
    engine.dispose()
    wait_running(master, cluster, {"demo_noop": 2})
    [event] = poll_until(lambda: cluster.events("override_applied"), what="override event")
    assert event.queue == "demo_resize" and "paused" in event.message


def test_a_restarted_manager_adopts_the_running_slots_without_restarting_them(
    cluster: Cluster,
) -> None:
    first = cluster.start_manager("manager-1")
    master = cluster.start_master("alpha")
    wait_running(master, cluster, {"demo_noop": 2, "demo_resize": 1})
    pids = master.slot_pids()
    first.kill_group()
    # The liveness (2 s), then room for a busy machine (10 s in all was too little room).
    poll_until(lambda: "manager silent" in master.log_text(), timeout_s=HEARTBEAT_S * LIVENESS + DEADLINE_S,
               what="the master noticing the manager's death")
    second = cluster.start_manager("manager-2")
    poll_until(lambda: f"manager pid {second.pid} answers" in master.log_text(), timeout_s=DEADLINE_S,
               what=lambda: f"the master reconnecting\n{cluster.logs()}")
    # Two plans after the new manager's first: it had every chance to change something.
    poll_until(lambda: second.log_text().count("joined") and _plans_after(cluster, second) >= 2,
               what=lambda: f"plans by the new manager\n{cluster.logs()}")
    assert master.slot_pids() == pids, master.log_text()
    assert master.running() == {"demo_noop": 2, "demo_resize": 1}
    assert master.log_text().count("forked slot") == 3


FOUR_NOOP_SLOTS = {
    "demo_noop": {"min_slots": 4, "max_slots": 4},
    "demo_resize": {"max_slots": 0}, "demo_echo": {"max_slots": 0}, "demo_flaky": {"max_slots": 0},
}


@pytest.fixture(scope="module")
def warm_four_slots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmClusters]:
    yield from WarmClusters.for_module(tmp_path_factory.mktemp("four_slots"), FOUR_NOOP_SLOTS)


@pytest.fixture
def two_masters(warm_four_slots: WarmClusters, request: pytest.FixtureRequest,
                ) -> Iterator[tuple[Cluster, Proc, Proc, Proc]]:
    """A manager and two masters running 4 slots between them: (cluster, manager, the master
    with the most slots, the other)."""
    cluster = warm_four_slots.take(request)
    try:
        manager = cluster.start_manager()
        masters = [cluster.start_master("alpha"), cluster.start_master("beta")]
        poll_until(lambda: len(cluster.events("master_joined")) == 2
                   and sum(m.running().get("demo_noop", 0) for m in masters) == 4,
                   timeout_s=DEADLINE_S, what=lambda: f"4 slots on 2 masters\n{cluster.logs()}")
        # Slots stay where they were planned.
        busiest, other = sorted(masters, key=lambda m: -m.running().get("demo_noop", 0))
        yield cluster, manager, busiest, other
    finally:
        cluster.close()


def test_a_dead_masters_slots_move_to_the_live_master_within_its_liveness(
    two_masters: tuple[Cluster, Proc, Proc, Proc],
) -> None:
    cluster, _, doomed, survivor = two_masters
    doomed.kill_group()
    # Lost after the liveness; then one plan and the forks (a few beacons).
    wait_running(survivor, cluster, {"demo_noop": 4}, timeout_s=HEARTBEAT_S * LIVENESS + DEADLINE_S)
    lost = [event.host for event in cluster.events("master_lost")]
    assert lost == [doomed.name.removeprefix("master-")], (
        [(e.kind, e.host, e.message) for e in cluster.events()], cluster.logs())


def test_a_master_that_dies_while_the_manager_is_frozen_is_lost_once(
    two_masters: tuple[Cluster, Proc, Proc, Proc],
) -> None:
    # Frozen, the manager found the masters' reports of that time still in the kernel: it
    # counted every master lost, took them back on those stale reports, and lost them again
    # while they reconnected (two master_lost for one host, each followed by a re-plan).
    cluster, manager, doomed, survivor = two_masters
    os.kill(manager.pid, signal.SIGSTOP)
    try:
        doomed.kill_group()
        # Twice: the survivor gave up on its first reconnect too (twice the liveness).
        poll_until(lambda: survivor.log_text().count("manager silent") >= 2,
                   timeout_s=10 * HEARTBEAT_S * LIVENESS, what="the survivor dropping the frozen manager")
    finally:
        os.kill(manager.pid, signal.SIGCONT)
    wait_running(survivor, cluster, {"demo_noop": 4}, timeout_s=HEARTBEAT_S * LIVENESS + DEADLINE_S)
    lost = [event.host for event in cluster.events("master_lost")]
    # The survivor is never lost: its slots do not hold its old connection open (before, the
    # manager took its reports on the new one for spoofs until the old one expired).
    assert lost == [doomed.name.removeprefix("master-")], cluster.logs()


def test_no_slot_holds_its_masters_manager_connection_and_a_reconnected_master_stays_accepted(
    cluster: Cluster,
) -> None:
    manager = cluster.start_manager()
    master = cluster.start_master("alpha")
    wait_running(master, cluster, {"demo_noop": 2, "demo_resize": 1})
    slots = list(master.slot_pids().values())
    first = poll_until(lambda: _manager_connections(cluster, [master.pid]),
                       what="the master's connection to the manager")
    assert not _manager_connections(cluster, slots), cluster.logs()
    for slot in slots:
        assert not _socket_inodes(slot) & _socket_inodes(master.pid), f"slot {slot}\n{cluster.logs()}"
    # Frozen for more than the master's liveness: the master drops the link and reconnects.
    # Counted from here: a master started before its manager answered has said both already.
    answers = f"manager pid {manager.pid} answers"
    silent_before, answers_before = master.log_text().count("manager silent"), master.log_text().count(answers)
    os.kill(manager.pid, signal.SIGSTOP)
    try:
        poll_until(lambda: master.log_text().count("manager silent") > silent_before,
                   timeout_s=HEARTBEAT_S * LIVENESS + DEADLINE_S, what="the master dropping the frozen manager")
    finally:
        os.kill(manager.pid, signal.SIGCONT)
    poll_until(lambda: master.log_text().count(answers) > answers_before,
               timeout_s=10 * HEARTBEAT_S * LIVENESS, what=lambda: f"the manager answering again\n{cluster.logs()}")
    # The old connection is closed by everyone: nothing of the master's session holds it.
    assert not _manager_connections(cluster, [master.pid, *slots]) & first, cluster.logs()
    assert sorted(master.slot_pids().values()) == sorted(slots), master.log_text()
    assert cluster.events("master_lost") == [], cluster.logs()
    assert "refused" not in manager.log_text(), manager.log_text()


def _manager_connections(cluster: Cluster, pids: list[int]) -> set[tuple[tuple[str, int], tuple[str, int]]]:
    """The (local, remote) addresses of the TCP connections to the manager these processes hold."""
    found = set()
    for pid in pids:
        for conn in psutil.Process(pid).net_connections(kind="tcp"):
            if conn.raddr and conn.raddr.port == cluster.manager_port:
                found.add((tuple(conn.laddr), tuple(conn.raddr)))
    return found


def _socket_inodes(pid: int) -> set[str]:
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:"):
                held.add(target)
    return held


def _jobs_recorded(engine: Engine, queue: str) -> int:
    with Session(engine) as session:
        total = session.scalar(select(func.sum(QueueSample.jobs_done)).where(QueueSample.queue == queue))
        return int(total or 0)


def _plans_after(cluster: Cluster, manager: Proc) -> int:
    engine = make_engine(cluster.database_url)
    try:
        active = [e for e in cluster.events("manager_active") if str(manager.pid) in e.message]
        if not active:
            return 0
        with Session(engine) as session:
            return len(set(session.scalars(
                select(SlotMapRow.at_unix).where(SlotMapRow.at_unix >= active[0].at_unix)
            )))
    finally:
        engine.dispose()
