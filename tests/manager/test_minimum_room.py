"""Capped hosts get back the slots the configured minimums need (manager/planning/minimum_room.py)."""
from __future__ import annotations

from config.models import QueueConfig
from manager.planning.minimum_room import slots_owed, with_room_for_minimums
from manager.storage.model import HostCapacity


def test_owed_are_the_minimums_and_one_slot_per_waiting_queue_of_queues_some_master_serves() -> None:
    queues = {"a": QueueConfig(min_slots=2), "b": QueueConfig(min_slots=1), "c": QueueConfig(min_slots=3),
              "d": QueueConfig(), "e": QueueConfig(), "off": QueueConfig(max_slots=0)}
    assert slots_owed(queues, {"a", "b"}, {}) == 3
    assert slots_owed(queues, set(), {"a": 5}) == 0
    # d waits (one slot owed), e is empty, a's minimum already covers its backlog, a queue
    # that may have no slot is owed none.
    assert slots_owed(queues, {"a", "d", "e", "off"}, {"a": 9, "d": 1, "e": 0, "off": 4}) == 3


def test_a_capped_host_is_raised_to_the_minimums_and_no_further() -> None:
    lifted = with_room_for_minimums([HostCapacity("a", 1)], {"a": 64}, minimums=3)
    assert lifted == [HostCapacity("a", 3)]
    # Capacity already covering the minimums is left as reported.
    assert with_room_for_minimums([HostCapacity("a", 5)], {"a": 64}, minimums=3) == [HostCapacity("a", 5)]


def test_the_room_goes_to_the_hosts_with_most_room_and_stops_at_their_ceilings() -> None:
    hosts = [HostCapacity("a", 1), HostCapacity("b", 1), HostCapacity("lost", 9, alive=False)]
    lifted = with_room_for_minimums(hosts, {"a": 2, "b": 10, "lost": 20}, minimums=8)
    # b has the most room and takes all 6 missing; the lost host counts for nothing and
    # gets nothing.
    assert lifted == [HostCapacity("a", 1), HostCapacity("b", 7), HostCapacity("lost", 9, alive=False)]
    # Room spread: a takes its one slot once b's room is down to a's.
    spread = with_room_for_minimums(hosts[:2], {"a": 2, "b": 3}, minimums=5)
    assert spread == [HostCapacity("a", 2), HostCapacity("b", 3)]
    # Ceilings too low for the minimums: every host at its ceiling, no more.
    full = with_room_for_minimums([HostCapacity("a", 1)], {"a": 2}, minimums=5)
    assert full == [HostCapacity("a", 2)]
