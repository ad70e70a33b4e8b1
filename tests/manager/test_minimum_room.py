"""Capped hosts get back the slots the configured minimums need (manager/planning/minimum_room.py)."""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

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


def _one_slot_per_pass(
    hosts: Sequence[HostCapacity], ceilings: Mapping[str, int], minimums: int,
) -> list[HostCapacity]:
    """with_room_for_minimums before the heap (main at 70f064a), the reference: every alive
    host re-sorted per slot given."""
    capacity = {h.host: h.capacity_slots for h in hosts}
    short = minimums - sum(capacity[h.host] for h in hosts if h.alive)
    while short > 0:
        room = {h.host: ceilings.get(h.host, 0) - capacity[h.host] for h in hosts if h.alive}
        host = max(sorted(room), key=lambda name: room[name], default=None)
        if host is None or room[host] <= 0:
            break
        capacity[host] += 1
        short -= 1
    return [HostCapacity(h.host, capacity[h.host], h.alive) for h in hosts]


def test_the_room_is_the_one_slot_per_pass_reference_s_on_random_small_clusters() -> None:
    rng = random.Random(20261129)
    raised = 0
    for _ in range(4000):
        # Few names, so hosts tie on room, share a name (alive and lost), or have no ceiling.
        names = [f"h{n}" for n in range(rng.randint(0, 6))]
        hosts = [HostCapacity(rng.choice(names), rng.randint(0, 8), alive=rng.random() < 0.8)
                 for _ in range(rng.randint(0, 6))] if names else []
        ceilings = {name: rng.randint(0, 12) for name in names if rng.random() < 0.85}
        minimums = rng.randint(0, 60)
        expected = _one_slot_per_pass(hosts, ceilings, minimums)
        assert with_room_for_minimums(hosts, ceilings, minimums) == expected, (hosts, ceilings, minimums)
        raised += expected != hosts
    assert raised > 1000  # most clusters were raised, not left as reported
