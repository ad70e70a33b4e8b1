"""Host capacity from PSS, MemAvailable and load (pure arithmetic)."""
from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from master.capacity import (
    Capacity,
    avg_slot_bytes,
    capacity,
    capped_by_load,
    load_bound,
    smoothed_busy,
)

MB = 1024 * 1024


def host_capacity(
    *,
    slots_pss: Sequence[int] = (50 * MB,) * 4,
    available: int = 1000 * MB,
    reserve: int = 1,
    max_slots: int = 64,
    load: float = 0.5,
) -> Capacity:
    return capacity(
        master_pss_bytes=100 * MB, slots_pss_bytes=slots_pss, mem_available_bytes=available,
        reserve_slots=reserve, max_slots=max_slots, load_avg_1m=load, cpus=2, max_load_per_cpu=4.0,
    )


def test_average_slot_divides_master_and_slots_pss_by_the_slots_only() -> None:
    assert avg_slot_bytes(master_pss_bytes=100 * MB, slots_pss_bytes=[50 * MB] * 4) == 75 * MB


def test_without_slots_a_slot_is_assumed_as_large_as_the_master() -> None:
    assert avg_slot_bytes(master_pss_bytes=100 * MB, slots_pss_bytes=[]) == 100 * MB


def test_capacity_is_pss_plus_available_over_avg_slot_minus_reserve() -> None:
    result = host_capacity()
    # (100 + 4 x 50 + 1000) MB / 75 MB = 17.3 -> 17, minus 1 reserve
    assert result.by_memory == 16
    assert result.slots == 16
    assert result.avg_slot_bytes == 75 * MB


def test_max_slots_bounds_capacity() -> None:
    assert host_capacity(max_slots=5).slots == 5


def test_capacity_never_goes_below_zero() -> None:
    result = host_capacity(available=0, reserve=50)
    assert result.slots == 0 and result.by_memory == 0


def bound(*, busy: float, load: float, slots: int = 0, floor: int = 1, max_slots: int = 64) -> int:
    """2 CPUs at 4.0 per CPU: the limit is a load of 8."""
    return load_bound(slots=slots, busy_slots=busy, load_avg_1m=load, cpus=2, max_load_per_cpu=4.0,
                      max_slots=max_slots, min_slots_under_load=floor)


def test_load_under_the_limit_does_not_bound() -> None:
    assert bound(busy=4, load=7.9) == 64


def test_over_the_limit_our_slots_get_the_room_the_outside_load_leaves() -> None:
    # 16 busy slots alone make a load of 16: 8 of them fit under the limit.
    assert bound(busy=16, load=16.0) == 8
    # 10 busy slots and 6 of outside load: 8 - 6 leaves room for 2.
    assert bound(busy=10, load=16.0) == 2


def test_outside_load_alone_over_the_limit_leaves_the_floor() -> None:
    assert bound(busy=0, load=50.0) == 1
    assert bound(busy=0, load=50.0, floor=3) == 3


def test_the_floor_never_exceeds_max_slots_and_zero_turns_it_off() -> None:
    assert bound(busy=0, load=50.0, floor=3, max_slots=2) == 2
    assert bound(busy=0, load=50.0, floor=3, max_slots=0) == 0
    assert bound(busy=0, load=50.0, floor=0) == 0


def test_busy_slots_above_the_load_count_as_no_outside_load() -> None:
    # I/O-bound slots are busy without being runnable: the load can be below their count.
    assert bound(busy=30, load=9.0) == 8


def test_slots_that_make_the_load_scale_down_in_proportion() -> None:
    # 30 slots busy on I/O make a load of 9 with an outside load of 1: not cut to 8 but to 26.
    assert bound(busy=30, slots=30, load=9.0) == 26
    assert bound(busy=10, slots=10, load=16.0) == 5
    result = host_capacity(slots_pss=[50 * MB] * 10, load=16.0)
    assert result.by_load == 5 and result.slots == 5


def test_memory_wins_over_the_floor() -> None:
    result = capacity(
        master_pss_bytes=100 * MB, slots_pss_bytes=[100 * MB] * 4, mem_available_bytes=0,
        reserve_slots=3, max_slots=64, load_avg_1m=100.0, cpus=2, max_load_per_cpu=4.0,
        busy_slots=0.0, min_slots_under_load=2,
    )
    assert result.by_load == 2 and result.by_memory == 1 and result.slots == 1
    assert not result.capped_by_load


def test_a_load_bound_under_memory_and_max_slots_is_a_cap() -> None:
    result = host_capacity(load=100.0)
    assert result.by_load == 1 and result.slots == 1 and result.load_limit == 8.0
    assert result.capped_by_load
    assert not host_capacity(load=1.0).capped_by_load
    assert not capped_by_load(by_load=5, by_memory=5, max_slots=64)


def refresh_many(*, outside_load: float, refreshes: int, slots: int = 8) -> list[int]:
    """The master's refresh loop once a second: its busy slots follow the capacity it
    computes, and the load average follows them and the outside load with the kernel's
    1-minute time constant."""
    load, busy, running = outside_load, 0.0, slots
    seen = []
    for _ in range(refreshes):
        busy = smoothed_busy(previous=busy, busy_now=running, elapsed_s=1.0)
        load = smoothed_busy(previous=load, busy_now=0, elapsed_s=1.0) + (outside_load + running) * (
            1 - smoothed_busy(previous=1.0, busy_now=0, elapsed_s=1.0))
        running = bound(busy=busy, load=load, slots=running, max_slots=slots)
        seen.append(running)
    return seen


def test_high_outside_load_for_many_refreshes_keeps_the_floor_not_zero() -> None:
    seen = refresh_many(outside_load=40.0, refreshes=600)
    # The old proportional cut (slots x limit / load) reached 0 here and stayed there.
    assert min(seen) == 1 and seen[-60:] == [1] * 60


def test_moderate_outside_load_settles_at_the_room_it_leaves() -> None:
    seen = refresh_many(outside_load=5.0, refreshes=600)
    # 8 - 5 leaves 3 (2 after rounding down): the cut stops there instead of sliding on, and
    # lifts once the load is back under the limit.
    assert min(seen) == 2 and max(seen[-120:]) == 8


def test_busy_slots_are_averaged_with_the_one_minute_time_constant() -> None:
    assert smoothed_busy(previous=0.0, busy_now=10, elapsed_s=60.0) == pytest.approx(10 * (1 - math.exp(-1)))
    assert smoothed_busy(previous=4.0, busy_now=0, elapsed_s=0.0) == 4.0
