"""How many hosts the manager tracks: at most max_hosts, lost ones forgotten (manager/hosts/masters.py)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_service_procs import server_proc
from test_service_stats import report, slot

from manager.hosts.link import ManagerSocket, Received
from manager.hosts.masters import FORGET_LOST_AFTER_S, Masters
from manager.storage.store import EventKind
from master.manager_frames import MasterFrame


@pytest.fixture
def masters() -> Iterator[Masters]:
    socket = ManagerSocket(f"tcp://127.0.0.1:{server_proc.free_port()}")
    try:
        yield Masters(socket, interval_s=1.0, liveness=3, stats_window_s=60.0, manager_pid=1,
                      now=0.0, max_hosts=2)
    finally:
        socket.close()


def frame(host: str, *, leaving: bool = False) -> Received:
    return Received(host.encode(), MasterFrame(report=report(host, [slot(1, "q")]), leaving=leaving))


def test_a_new_host_past_max_hosts_is_refused_while_all_are_alive(masters: Masters) -> None:
    assert [e.kind for e in masters.on_frame(frame("a"), 0.0)] == [EventKind.MASTER_JOINED]
    assert [e.kind for e in masters.on_frame(frame("b"), 0.0)] == [EventKind.MASTER_JOINED]
    assert masters.on_frame(frame("c"), 0.5) == []
    assert masters.alive_hosts() == ["a", "b"]
    assert "c" not in masters.view.reports
    [(reason, count)] = masters.socket.refusals.totals.items()
    assert "max_hosts 2" in reason and count == 1
    # A known host still reports as usual.
    assert masters.on_frame(frame("a"), 0.6) == []


def test_the_longest_lost_host_makes_room_for_a_new_one(masters: Masters) -> None:
    masters.on_frame(frame("a"), 0.0)
    masters.on_frame(frame("b"), 1.0)
    lost = masters.expire(10.0)
    assert {e.host for e in lost} == {"a", "b"}
    assert [e.kind for e in masters.on_frame(frame("c"), 11.0)] == [EventKind.MASTER_JOINED]
    assert {p.host for p in masters.peers.all()} == {"b", "c"}
    assert "a" not in masters.view.reports
    # "a" comes back as a new host (joined, not back): it was forgotten; "b" makes room.
    change = masters.on_frame(frame("a"), 12.0)
    assert [e.kind for e in change] == [EventKind.MASTER_JOINED]


def test_a_host_lost_for_an_hour_is_forgotten(masters: Masters) -> None:
    masters.on_frame(frame("a"), 0.0)
    masters.expire(10.0)
    assert masters.peers.get("a") is not None
    masters.expire(10.0 + FORGET_LOST_AFTER_S)
    assert masters.peers.get("a") is None and masters.view.reports == {}


def test_goodbyes_from_hosts_never_seen_cost_nothing(masters: Masters) -> None:
    for i in range(100):
        assert masters.on_frame(frame(f"ghost{i}", leaving=True), 0.0) == []
    assert masters.view.reports == {} and len(masters.peers) == 0

