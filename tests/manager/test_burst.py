"""Bursts between plans (manager/burst.py): which backlogs count as a burst, and a plan that grows
only the bursting queue, from free capacity and lower priorities, past its dead band."""
from __future__ import annotations

from config.models import QueueConfig
from manager.burst import bursting, plan_burst
from manager.model import HostCapacity, QueueStats, SlotMap

TARGET = 0.8
QUEUES = {
    "burst": QueueConfig(priority=5, min_slots=1, max_slots=8, batch_size=10),
    "bulk": QueueConfig(priority=0, min_slots=1, max_slots=10, batch_size=10),
    "vip": QueueConfig(priority=9, min_slots=0, max_slots=10, batch_size=10),
}


def one_host(slots: dict[str, str]) -> SlotMap:
    return SlotMap(hosts={"h": slots})


def test_a_backlog_that_appears_or_doubles_by_two_batches_is_a_burst_and_any_backlog_without_a_slot() -> None:
    slots = {"burst": 1, "bulk": 9}
    assert bursting({}, {"burst": 4000}, QUEUES, slots) == ["burst"]
    assert bursting({"burst": 100}, {"burst": 150}, QUEUES, slots) == []       # not doubled
    assert bursting({"burst": 5}, {"burst": 20}, QUEUES, slots) == []          # < 2 batches more
    assert bursting({"burst": 5}, {"burst": 25}, QUEUES, slots) == ["burst"]
    assert bursting({}, {"burst": 4000}, QUEUES, {"burst": 8}) == []           # at its max already
    # A backlog appearing in a queue with no slot is a burst at one job; with slots, at two batches.
    assert bursting({}, {"burst": 1, "vip": 1}, QUEUES, slots) == ["vip"]
    assert bursting({}, {"burst": 1, "vip": 1}, QUEUES, {**slots, "vip": 1}) == []
    assert bursting({}, {"burst": 20, "vip": 20}, QUEUES, {**slots, "vip": 1}) == ["vip", "burst"]


def test_the_burst_queue_takes_lower_priority_slots_down_to_their_minimum_and_nothing_else_moves() -> None:
    current = one_host({**{f"h:{n}": "bulk" for n in range(9)}, "h:9": "burst"})
    # 4,000 jobs of 20 ms behind one slot: 80 s of backlog, far past the dead band.
    stats = {"burst": QueueStats(waiting_jobs=4000, jobs_done=3000, busy_s=60.0, slot_lifetime_s=60.0)}
    result = plan_burst(current, QUEUES, stats, [HostCapacity("h", 10)], ["burst"], target_load=TARGET)
    assert result.slot_map.counts() == {"burst": 8, "bulk": 2}
    assert all(move.kind == "retarget" for move in result.moves)
    assert result.queues["burst"].desired_slots == 8


def test_free_capacity_goes_first_and_higher_priorities_are_never_taken() -> None:
    current = one_host({"h:0": "burst", **{f"h:{n}": "vip" for n in range(1, 7)}})
    stats = {"burst": QueueStats(waiting_jobs=4000, jobs_done=3000, busy_s=60.0, slot_lifetime_s=60.0)}
    result = plan_burst(current, QUEUES, stats, [HostCapacity("h", 10)], ["burst"], target_load=TARGET)
    assert result.slot_map.counts() == {"burst": 4, "vip": 6}


def test_a_small_rise_inside_the_dead_band_moves_nothing() -> None:
    current = one_host({**{f"h:{n}": "burst" for n in range(4)}, **{f"h:{n}": "bulk" for n in range(4, 10)}})
    # 4 slots busy 70% of the window and a small backlog: demand within 4 x (1 + 0.05).
    stats = {"burst": QueueStats(waiting_jobs=20, jobs_done=8400, busy_s=168.0, slot_lifetime_s=240.0)}
    result = plan_burst(current, QUEUES, stats, [HostCapacity("h", 10)], ["burst"], target_load=TARGET)
    assert result.moves == ()
