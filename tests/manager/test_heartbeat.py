"""Paranoid Pirate heartbeats on both sides, as pure state machines with the clock passed in."""
from __future__ import annotations

import pytest

from manager.hosts.heartbeat import Change, MasterState, Peers, TransitionError, _move
from master.manager_frames import LinkFrameError, ManagerFrame, MasterFrame
from master.manager_link import Heartbeats, LinkAction, LinkState, parse_endpoints

CONNECT, DISCONNECT, SEND = LinkAction.CONNECT, LinkAction.DISCONNECT, LinkAction.SEND_REPORT


def ticks(beats: Heartbeats, start: float, end: float, step: float = 0.1) -> list[tuple[float, LinkAction]]:
    """Every action from start to end, ticking every `step` seconds."""
    actions = []
    for i in range(round((end - start) / step) + 1):
        now = round(start + i * step, 6)
        actions += [(now, action) for action in beats.tick(now)]
    return actions


def test_a_master_connects_at_once_and_reports_every_interval_while_the_manager_answers() -> None:
    beats = Heartbeats.for_interval(1.0, 3)
    actions = []
    for step in range(0, 51):
        now = step / 10
        actions += [(now, a) for a in beats.tick(now)]
        beats.on_frame(now)
    assert actions == [(0.0, CONNECT), (0.0, SEND), (1.0, SEND), (2.0, SEND), (3.0, SEND),
                       (4.0, SEND), (5.0, SEND)]
    assert beats.state is LinkState.CONNECTED


def test_a_silent_manager_is_dropped_after_liveness_intervals_and_retried_with_doubling_backoff() -> None:
    beats = Heartbeats.for_interval(1.0, 3)
    events = [(at, a) for at, a in ticks(beats, 0.0, 120.0) if a is not SEND]
    # Connected at 0; silent 3 s -> drop; reconnect after 1, 2, 4, 8, 16, 32, 32 s of waiting.
    assert events[:4] == [(0.0, CONNECT), (3.0, DISCONNECT), (4.0, CONNECT), (7.0, DISCONNECT)]
    waits = [round(events[i + 1][0] - events[i][0], 3) for i in range(1, len(events) - 1, 2)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 32.0][: len(waits)]
    assert len(waits) >= 6


def test_any_frame_from_the_manager_resets_the_backoff_to_one_interval() -> None:
    beats = Heartbeats.for_interval(1.0, 3)
    ticks(beats, 0.0, 20.0)  # several failed rounds: the backoff has grown
    assert beats.backoff_s > 1.0
    now = 20.0
    while beats.state is not LinkState.CONNECTED:
        now += 0.1
        beats.tick(now)
    beats.on_frame(now)
    assert beats.backoff_s == 1.0
    assert beats.expires_at == pytest.approx(now + 3.0)


def test_no_burst_of_reports_follows_a_stalled_loop() -> None:
    beats = Heartbeats.for_interval(1.0, 100)
    beats.tick(0.0)
    assert beats.tick(10.0) == [SEND]
    assert beats.tick(10.5) == []
    assert beats.tick(11.0) == [SEND]


def test_the_manager_counts_a_silent_master_lost_after_liveness_intervals() -> None:
    peers = Peers(interval_s=1.0, liveness=3)
    assert peers.on_report("a", routing_id=b"r1", master_pid=10, now=0.0) is not None
    assert peers.on_report("a", routing_id=b"r1", master_pid=10, now=1.0) is None
    assert peers.expire(3.9) == []
    assert peers.next_expiry() == 4.0
    [lost] = peers.expire(4.0)
    assert (lost.host, lost.change, lost.silent_s) == ("a", Change.LOST, 3.0)
    assert peers.expire(10.0) == []
    assert list(peers.alive()) == []


def test_a_lost_master_that_reports_again_is_back_and_its_new_routing_id_is_used() -> None:
    peers = Peers(interval_s=1.0, liveness=3)
    peers.on_report("a", routing_id=b"r1", master_pid=10, now=0.0)
    peers.expire(5.0)
    back = peers.on_report("a", routing_id=b"r2", master_pid=10, now=6.0)
    assert back is not None and back.change is Change.BACK and back.silent_s == 6.0
    peer = peers.get("a")
    assert peer is not None and peer.routing_id == b"r2" and peer.state is MasterState.ALIVE


def test_a_new_master_pid_on_a_live_host_is_a_restart_and_a_goodbye_is_a_departure() -> None:
    peers = Peers(interval_s=1.0, liveness=3)
    joined = peers.on_report("a", routing_id=b"r1", master_pid=10, now=0.0)
    assert joined is not None and joined.change is Change.JOINED
    restarted = peers.on_report("a", routing_id=b"r2", master_pid=11, now=0.5)
    assert restarted is not None and restarted.change is Change.RESTARTED
    left = peers.on_report("a", routing_id=b"r2", master_pid=11, now=0.6, leaving=True)
    assert left is not None and left.change is Change.LEFT
    assert peers.on_report("a", routing_id=b"r2", master_pid=11, now=0.7, leaving=True) is None
    assert peers.expire(100.0) == []


def test_a_move_the_state_machine_does_not_allow_names_both_states() -> None:
    peers = Peers(interval_s=1.0, liveness=3)
    peers.on_report("a", routing_id=b"r", master_pid=1, now=0.0)
    peer = peers.get("a")
    assert peer is not None
    with pytest.raises(TransitionError, match="from alive to alive"):
        _move(peer, MasterState.ALIVE)


def test_frames_that_do_not_decode_raise_one_named_error() -> None:
    assert ManagerFrame.decode(ManagerFrame(manager_pid=5, slots={3: "q"}).encode()).slots == {3: "q"}
    for garbage in (b"", b"{", b'{"manager_pid": 0}', b'{"manager_pid": 1, "extra": 2}'):
        with pytest.raises(LinkFrameError, match="bad ManagerFrame"):
            ManagerFrame.decode(garbage)
    with pytest.raises(LinkFrameError, match="bad MasterFrame"):
        MasterFrame.decode(b'{"leaving": true}')


def test_a_master_may_name_the_active_manager_and_its_standby() -> None:
    assert parse_endpoints("tcp://a:7500, tcp://b:7500") == ["tcp://a:7500", "tcp://b:7500"]
    with pytest.raises(ValueError, match="no manager endpoint"):
        parse_endpoints(" , ")


def test_a_stall_of_the_manager_is_not_counted_as_the_masters_silence() -> None:
    peers = Peers(interval_s=1.0, liveness=3)
    peers.listened(0.0)
    peers.on_report("a", routing_id=b"r1", master_pid=10, now=0.0)
    # Frozen from 0.0 to 10.0: the reports of that time are still in the kernel, not lost.
    assert peers.listened(10.0) == 9.0
    assert peers.expire(10.0) == []
    assert peers.next_expiry() == 12.0
    [lost] = peers.expire(12.0)
    assert (lost.host, lost.change, lost.silent_s) == ("a", Change.LOST, 3.0)


def test_turns_within_one_interval_excuse_nothing() -> None:
    peers = Peers(interval_s=1.0, liveness=3)
    peers.on_report("a", routing_id=b"r1", master_pid=10, now=0.0)
    assert [peers.listened(t / 2) for t in range(9)] == [0.0] * 9
    [lost] = peers.expire(3.0)
    assert lost.silent_s == 3.0
