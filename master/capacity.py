"""How many slots this host can run: pure arithmetic on PSS, MemAvailable and the load average."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Capacity:
    slots: int
    by_memory: int
    by_load: int
    max_slots: int
    avg_slot_bytes: int


def avg_slot_bytes(*, master_pss_bytes: int, slots_pss_bytes: Sequence[int]) -> int:
    """(PSS of master + all slots) / slots. The master is deliberately not a divisor, so the
    estimate runs a little high. With no slot yet, a slot is assumed as large as the master."""
    total = master_pss_bytes + sum(slots_pss_bytes)
    return max(1, total // max(1, len(slots_pss_bytes)))


def capacity(
    *,
    master_pss_bytes: int,
    slots_pss_bytes: Sequence[int],
    mem_available_bytes: int,
    reserve_slots: int,
    max_slots: int,
    load_avg_1m: float,
    cpus: int,
    max_load_per_cpu: float,
) -> Capacity:
    """Slots the host can hold: (PSS of master and slots + MemAvailable) / avg slot - reserve,
    bounded by the load average and `max_slots`."""
    avg = avg_slot_bytes(master_pss_bytes=master_pss_bytes, slots_pss_bytes=slots_pss_bytes)
    pss_total = master_pss_bytes + sum(slots_pss_bytes)
    by_memory = max(0, (pss_total + mem_available_bytes) // avg - reserve_slots)
    by_load = load_bound(
        slots=len(slots_pss_bytes),
        load_avg_1m=load_avg_1m,
        cpus=cpus,
        max_load_per_cpu=max_load_per_cpu,
        max_slots=max_slots,
    )
    return Capacity(
        slots=max(0, min(by_memory, by_load, max_slots)),
        by_memory=by_memory,
        by_load=by_load,
        max_slots=max_slots,
        avg_slot_bytes=avg,
    )


def load_bound(
    *, slots: int, load_avg_1m: float, cpus: int, max_load_per_cpu: float, max_slots: int
) -> int:
    """Under the load limit the load does not bound the host. Over it, the slots scale down
    in proportion (a busy slot adds about 1 to the load), so a host twice over keeps half."""
    limit = max_load_per_cpu * max(1, cpus)
    if load_avg_1m <= limit:
        return max_slots
    return int(slots * limit / load_avg_1m)
