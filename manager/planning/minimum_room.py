"""Room for the queues' configured minimums on hosts that the load bound caps (pure).

A master over its load limit reports fewer slots than its memory holds (master/capacity.py),
down to `min_slots_under_load` (1 by default). With one slot and two queues of
`min_slots = 1`, the planner gave the slot to the higher priority and the other queue got
none for as long as the load stayed high: docs/GUIDE.md's cluster, run beside two busy loops
and a loaded test run (load 12 on 2 CPUs), did 0 of 110 thumbnails jobs in 69 s while its
emails queue held the one slot; with room for both minimums, its notify queue (no minimum)
then did none of 114 jobs in 82 s beside the two idle minimum slots. A queue's minimum is a
promise of the config, and "a capped host keeps serving its queues, slowly" the load bound's
own: the load bound is a courtesy to the host's other programs. So a capped host gets back,
up to its memory and max_slots, the slots owed: each queue's minimum, and one for a queue
with waiting jobs and no minimum. No more: every other slot still follows the load, and the
master runs the manager's map within that same ceiling (master/reconciler.py).
"""
from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping, Sequence

from config.models import QueueConfig
from manager.storage.model import HostCapacity
from master.report import HostReport


def slots_owed(
    queues: Mapping[str, QueueConfig], handled: Collection[str], waiting: Mapping[str, int],
) -> int:
    """Each queue's minimum, or one slot if it has waiting jobs and may have a slot at all;
    only queues some master can serve (one without a handler anywhere gets no slot)."""
    return sum(
        max(config.min_slots, 1 if waiting.get(name, 0) > 0 and config.max_slots > 0 else 0)
        for name, config in queues.items() if name in handled
    )


def with_room_for_minimums(
    hosts: Sequence[HostCapacity], ceilings: Mapping[str, int], minimums: int,
) -> list[HostCapacity]:
    """`hosts` with their capacities raised, one slot at a time to the host with the most
    room under its ceiling, until together they hold `minimums` or no ceiling allows more."""
    capacity = {h.host: h.capacity_slots for h in hosts}
    short = minimums - sum(capacity[h.host] for h in hosts if h.alive)
    # A heap of (-room, name), one entry per alive host, updated per slot given: re-sorting
    # every host per slot took 114 ms of a 310 ms full plan at 10,000 queues of min_slots = 1
    # on 100 capped hosts (bench/minimum_room_cost.py). Ties go to the first name, as before.
    room = [(capacity[name] - ceilings.get(name, 0), name) for name in {h.host for h in hosts if h.alive}]
    heapq.heapify(room)
    while short > 0 and room and room[0][0] < 0:
        less_room, host = room[0]
        capacity[host] += 1
        heapq.heapreplace(room, (less_room + 1, host))
        short -= 1
    return [HostCapacity(h.host, capacity[h.host], h.alive) for h in hosts]


def host_capacities(
    reports: Mapping[str, HostReport], alive: Sequence[str], queues: Mapping[str, QueueConfig],
    handled: Collection[str], waiting: Mapping[str, int],
) -> list[HostCapacity]:
    """The capacities the planner uses: each alive host's reported capacity, with room made
    for the slots owed on hosts whose load, not memory or max_slots, caps them."""
    hosts = [HostCapacity(h, reports[h].capacity) for h in alive]
    ceilings = {h: min(reports[h].capacity_by_memory, reports[h].max_slots) for h in alive}
    return with_room_for_minimums(hosts, ceilings, slots_owed(queues, handled, waiting))
