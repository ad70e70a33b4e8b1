"""The master link over real ZeroMQ sockets: reports up, maps down, bad frames dropped, CURVE."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from test_service_procs import poll_until, server_proc
from test_service_stats import report, slot

from config.curve import CurveKeys
from manager.hosts.link import ManagerSocket, Received
from master.manager_frames import ManagerFrame, MasterFrame
from master.manager_link import Heartbeats, ManagerLink

HEARTBEAT_S = 0.1


@pytest.fixture
def endpoint() -> str:
    return f"tcp://127.0.0.1:{server_proc.free_port()}"


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    made: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield made
    made.term()


def exchange(manager: ManagerSocket, link: ManagerLink, *, timeout_s: float = 5.0) -> list[Received]:
    """Poll the master link until the manager has received something."""
    def step() -> list[Received]:
        link.poll(time.monotonic(), lambda: report("alpha", [slot(1, "q")]))
        return manager.receive(0.02)
    return poll_until(step, timeout_s=timeout_s, what="a report at the manager")


def test_reports_reach_the_manager_and_its_map_reaches_the_master(
    endpoint: str, context: zmq.Context[zmq.Socket[bytes]]
) -> None:
    manager = ManagerSocket(endpoint)
    link = ManagerLink([endpoint], Heartbeats.for_interval(HEARTBEAT_S, 3), context=context)
    try:
        [received, *_] = exchange(manager, link)
        assert received.frame.report.host == "alpha" and not received.frame.leaving
        assert manager.send(received.routing_id, ManagerFrame(manager_pid=42, slots={1: "q", 2: "r"}))
        frames = poll_until(lambda: link.poll(time.monotonic(), lambda: report("alpha", [])),
                            what="the map at the master")
        assert frames[-1].slots == {1: "q", 2: "r"} and link.manager_pid == 42
        assert not manager.send(b"\x00nobody", ManagerFrame(manager_pid=42))
    finally:
        link.close()
        manager.close()


def test_a_frame_that_does_not_decode_is_dropped_and_the_next_one_still_arrives(
    endpoint: str, context: zmq.Context[zmq.Socket[bytes]]
) -> None:
    manager = ManagerSocket(endpoint)
    rogue = context.socket(zmq.DEALER)
    rogue.setsockopt(zmq.LINGER, 0)
    rogue.connect(endpoint)
    link = ManagerLink([endpoint], Heartbeats.for_interval(HEARTBEAT_S, 3), context=context)
    try:
        rogue.send(b"not json")
        rogue.send_multipart([b"two", b"parts"])
        received = exchange(manager, link)
        assert {r.frame.report.host for r in received} == {"alpha"}
    finally:
        rogue.close()
        link.close()
        manager.close()


def test_with_curve_only_a_master_holding_the_cluster_secret_gets_through(
    endpoint: str, context: zmq.Context[zmq.Socket[bytes]], tmp_path: Path
) -> None:
    secret_file = tmp_path / "curve.secret"
    secret_file.write_bytes(zmq.curve_keypair()[1] + b"\n")
    keys = CurveKeys.from_file(secret_file)
    manager = ManagerSocket(endpoint, curve=keys)
    # A stranger that knows the manager's public key, but not the cluster's secret.
    stranger = context.socket(zmq.DEALER)
    stranger.setsockopt(zmq.LINGER, 0)
    stranger.curve_publickey, stranger.curve_secretkey = zmq.curve_keypair()
    stranger.curve_serverkey = keys.public
    stranger.connect(endpoint)
    member = ManagerLink([endpoint], Heartbeats.for_interval(HEARTBEAT_S, 3), context=context,
                         curve=keys)
    try:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            with contextlib.suppress(zmq.Again):
                stranger.send(MasterFrame(report=report("stranger", [])).encode(), zmq.NOBLOCK)
            assert manager.receive(0.05) == []
        received = exchange(manager, member)
        assert {r.frame.report.host for r in received} == {"alpha"}
    finally:
        stranger.close()
        member.close()
        manager.close()


def test_a_slot_change_is_reported_at_once_but_reports_keep_their_gap() -> None:
    """Issue 28: the dashboard's slot counts trail the masters by at most 1 s; a report only
    at each 1 s heartbeat left a started slot unseen for up to a second before the manager's
    own half-second write. A change asks for a report now, never closer than the gap."""
    from master.manager_link import EARLY_REPORT_GAP_S, LinkAction

    beats = Heartbeats.for_interval(1.0, 3)
    assert LinkAction.SEND_REPORT in beats.tick(0.0)  # connects and reports
    assert beats.tick(0.5) == []
    beats.report_soon(0.5)
    assert beats.tick(0.5) == [LinkAction.SEND_REPORT]
    beats.report_soon(0.55)  # another change right after: waits out the gap
    assert beats.tick(0.55) == []
    assert beats.tick(0.5 + EARLY_REPORT_GAP_S) == [LinkAction.SEND_REPORT]
    # Then the rhythm again: the next report a heartbeat later, not at the old time.
    assert beats.tick(1.2) == []
    assert beats.tick(0.5 + EARLY_REPORT_GAP_S + 1.0) == [LinkAction.SEND_REPORT]
