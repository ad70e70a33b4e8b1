"""Group commit's wait for the cohort: who is waited for, and for how long (real sockets)."""
from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from queue_server.server.cohort import FD_SETSIZE, MAX_WAIT_S, Cohort

FSYNC_S = 0.0008  # under the cap, and long enough for select() timing to be clear
WAITS = 5


@dataclass
class FakeConnection:
    fd: int
    closing: bool = False
    requested: bool = False
    quick: bool = True
    answered_at: float = 0.0


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made = [socket.socketpair() for _ in range(3)]
    yield made
    for a, b in made:
        a.close()
        b.close()


def cohort_of(members: list[FakeConnection]) -> Cohort:
    cohort = Cohort()
    cohort.synced(FSYNC_S)
    cohort.answered(members, time.perf_counter())
    return cohort


def test_no_wait_before_an_fsync_was_measured(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    cohort = Cohort()
    cohort.answered([FakeConnection(pairs[0][0].fileno())], 0.0)
    assert cohort.max_wait_s == 0.0
    assert cohort.wait() is False


def test_a_lone_client_that_already_sent_is_not_waited_for(
        pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    member = FakeConnection(pairs[0][0].fileno())
    cohort = cohort_of([member])
    cohort.arrived(member, time.perf_counter())
    assert cohort.missing_fds() == []  # nobody to wait for: wait() returns without select()
    assert cohort.wait() is False
    assert cohort.deadline == 0.0


def test_waits_until_a_missing_member_sends(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    (server_side, client_side), (other_server, _) = pairs[0], pairs[1]
    here, missing = FakeConnection(other_server.fileno()), FakeConnection(server_side.fileno())
    cohort = cohort_of([here, missing])
    cohort.arrived(here, time.perf_counter())
    assert cohort.missing_fds() == [server_side.fileno()]
    client_side.send(b"PUT q 0 1\r\nx")
    assert cohort.wait() is True  # readable: the loop reads it, then the flush comes back
    cohort.arrived(missing, time.perf_counter())
    assert missing.quick
    assert cohort.wait() is False  # everyone is in: sync now


def test_the_wait_is_bounded_by_one_fsync_time(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    silent = FakeConnection(pairs[0][0].fileno())
    cohort = cohort_of([silent])
    waits = []
    # Several waits: one can be stretched by a busy machine leaving this process unscheduled;
    # a wait that is not bounded by the fsync time is long every time.
    for _ in range(WAITS):
        started = time.perf_counter()
        assert cohort.wait() is False
        waits.append(time.perf_counter() - started)
        assert cohort.deadline == 0.0
    assert min(waits) >= FSYNC_S * 0.9
    assert min(waits) < 1.0, waits


def test_a_slow_member_is_not_waited_for_next_time(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    thinker = FakeConnection(pairs[0][0].fileno())
    cohort = cohort_of([thinker])
    cohort.arrived(thinker, thinker.answered_at + 3 * FSYNC_S)
    assert not thinker.quick
    cohort.answered([thinker], time.perf_counter())
    assert cohort.missing_fds() == []
    assert cohort.wait() is False
    assert cohort.deadline == 0.0


def test_closing_and_unselectable_members_are_skipped(
        pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    closing = FakeConnection(pairs[0][0].fileno(), closing=True)
    high = FakeConnection(FD_SETSIZE + 5)
    cohort = cohort_of([closing, high])
    assert cohort.missing_fds() == []


def test_the_wait_never_exceeds_the_cap() -> None:
    cohort = Cohort()
    cohort.synced(1.0)  # a very slow disk
    assert cohort.max_wait_s == MAX_WAIT_S


def test_a_member_whose_socket_is_already_closed_does_not_stop_the_sync(
        pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    gone_socket, peer = socket.socketpair()
    gone = FakeConnection(gone_socket.fileno())
    gone_socket.close()
    try:
        cohort = cohort_of([gone])
        assert cohort.wait() is False
        assert cohort.deadline == 0.0
    finally:
        peer.close()
