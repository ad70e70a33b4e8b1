"""How many slots this host can run: pure arithmetic on PSS, MemAvailable and the load average."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# The kernel's 1-minute load average is an exponential average with this time constant; our
# busy slots are averaged the same way, so the two can be subtracted (see `load_bound`).
LOAD_AVG_WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class Capacity:
    slots: int
    by_memory: int
    by_load: int
    max_slots: int
    avg_slot_bytes: int
    # max_load_per_cpu x CPUs: the load above which `by_load` bounds the host (0: not measured).
    load_limit: float = 0.0

    @property
    def capped_by_load(self) -> bool:
        return capped_by_load(by_load=self.by_load, by_memory=self.by_memory, max_slots=self.max_slots)


def capped_by_load(*, by_load: int, by_memory: int, max_slots: int) -> bool:
    """The load, not memory or max_slots, sets the capacity (memory wins a tie: it is the hard limit)."""
    return by_load < min(by_memory, max_slots)


def avg_slot_bytes(*, master_pss_bytes: int, slots_pss_bytes: Sequence[int]) -> int:
    """(PSS of master + all slots) / slots. The master is deliberately not a divisor, so the
    estimate runs a little high. With no slot yet, a slot is assumed as large as the master."""
    total = master_pss_bytes + sum(slots_pss_bytes)
    return max(1, total // max(1, len(slots_pss_bytes)))


def smoothed_busy(*, previous: float, busy_now: int, elapsed_s: float) -> float:
    """Our busy slots averaged like the kernel averages runnable tasks into the 1-minute load,
    so `load - smoothed_busy` stays an estimate of the outside load while our count changes
    (an instant count would read the last minute's load of slots just stopped as outside load)."""
    decay = math.exp(-max(0.0, elapsed_s) / LOAD_AVG_WINDOW_S)
    return previous * decay + busy_now * (1.0 - decay)


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
    busy_slots: float = 0.0,
    min_slots_under_load: int = 1,
) -> Capacity:
    """Slots the host can hold: (PSS of master and slots + MemAvailable) / avg slot - reserve,
    bounded by the load average (never below `min_slots_under_load`) and `max_slots`."""
    avg = avg_slot_bytes(master_pss_bytes=master_pss_bytes, slots_pss_bytes=slots_pss_bytes)
    pss_total = master_pss_bytes + sum(slots_pss_bytes)
    by_memory = max(0, (pss_total + mem_available_bytes) // avg - reserve_slots)
    by_load = load_bound(
        slots=len(slots_pss_bytes),
        busy_slots=busy_slots,
        load_avg_1m=load_avg_1m,
        cpus=cpus,
        max_load_per_cpu=max_load_per_cpu,
        max_slots=max_slots,
        min_slots_under_load=min_slots_under_load,
    )
    return Capacity(
        slots=max(0, min(by_memory, by_load, max_slots)),
        by_memory=by_memory,
        by_load=by_load,
        max_slots=max_slots,
        avg_slot_bytes=avg,
        load_limit=max_load_per_cpu * max(1, cpus),
    )


def load_bound(
    *, slots: int, busy_slots: float, load_avg_1m: float, cpus: int, max_load_per_cpu: float,
    max_slots: int, min_slots_under_load: int,
) -> int:
    """Under the load limit the load does not bound the host. Over it, the larger of two
    estimates, as a busy slot adds about 1 to the load:
      - the slots scaled down in proportion (slots x limit / load): right when our slots make
        the load, and gentle with slots that wait on I/O while busy;
      - the room the outside load leaves (limit - (load - our busy slots)): right when another
        program makes it. The scaling alone fed on itself then, one cut a second down to 0
        slots, and the host stopped serving its queues for good.
    Never below `min_slots_under_load`, nor above `max_slots`."""
    limit = max_load_per_cpu * max(1, cpus)
    if load_avg_1m <= limit:
        return max_slots
    scaled = int(slots * limit / load_avg_1m)
    outside = load_avg_1m - min(max(0.0, busy_slots), load_avg_1m)
    room = int(limit - outside)
    return min(max_slots, max(min_slots_under_load, scaled, room))
