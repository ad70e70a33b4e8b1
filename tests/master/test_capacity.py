"""Host capacity from PSS, MemAvailable and load (pure arithmetic)."""
from __future__ import annotations

from collections.abc import Sequence

from master.capacity import Capacity, avg_slot_bytes, capacity, load_bound

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


def test_load_under_the_limit_does_not_bound() -> None:
    assert load_bound(slots=4, load_avg_1m=7.9, cpus=2, max_load_per_cpu=4.0, max_slots=64) == 64


def test_load_twice_over_the_limit_halves_the_slots() -> None:
    assert load_bound(slots=10, load_avg_1m=16.0, cpus=2, max_load_per_cpu=4.0, max_slots=64) == 5
    result = host_capacity(slots_pss=[50 * MB] * 10, load=16.0)
    assert result.by_load == 5 and result.slots == 5
