"""Baselines the simulator compares the planner with: static slots and an HPA-style rule.

Both place slots the way a plain scheduler places pods: no priorities (a short cluster
serves queues in turn), no retargeting (a slot that changes queue is stopped and another
spawned), new slots on the host with the most free capacity.
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence

from manager.planning.placement import slot_number
from manager.planning.planner import NO_STATS, queue_demand
from manager.simulator.scenario import Scenario
from manager.storage.model import HostCapacity, Move, MoveKind, QueueStats, SlotMap

HPA_TOLERANCE = 0.1
HPA_SCALE_DOWN_WINDOW_S = 300.0


def static_counts(scenario: Scenario) -> dict[str, int]:
    """Slots per queue sized to its mean demand over the run, at the target load."""
    counts = {}
    for name, queue in scenario.queues.items():
        busy_slots = queue.arrivals.mean_rate(scenario.duration_s) * queue.job.mean_s
        wanted = math.ceil(busy_slots / scenario.target_load)
        counts[name] = max(queue.min_slots, min(queue.max_slots, wanted))
    return counts


def fill(current: SlotMap, desired: Mapping[str, int], hosts: Sequence[HostCapacity]) -> list[Move]:
    """Moves that bring per-queue counts to `desired` without priorities or retargets."""
    capacity = {h.host: h.capacity_slots for h in hosts if h.alive}
    slots = {h: dict(current.hosts.get(h, {})) for h in sorted(capacity)}
    moves: list[Move] = []

    def stop(host: str, queue: str) -> None:
        slot_id = max((s for s, q in slots[host].items() if q == queue), key=_newest)
        del slots[host][slot_id]
        moves.append(Move(MoveKind.STOP, host, slot_id, queue, None))

    for host, assigned in slots.items():
        while len(assigned) > capacity[host]:
            stop(host, max(assigned.values()))
    counts = SlotMap(hosts=slots).counts()
    for queue in sorted(counts):
        for _ in range(counts[queue] - desired.get(queue, 0)):
            per_host = SlotMap(hosts=slots).host_counts(queue)
            stop(min(per_host, key=lambda h: (-per_host[h], h)), queue)
    counts = SlotMap(hosts=slots).counts()
    missing = {q: n - counts.get(q, 0) for q, n in desired.items() if n > counts.get(q, 0)}
    free = [(len(s) - capacity[h], h) for h, s in slots.items() if len(s) < capacity[h]]
    heapq.heapify(free)
    next_number = {h: max((slot_number(s) for s in a), default=0) + 1 for h, a in slots.items()}
    turn = deque(sorted(missing))
    while turn and free:
        queue = turn.popleft()
        used, host = heapq.heappop(free)
        slot_id = f"{host}:{next_number[host]}"
        next_number[host] += 1
        slots[host][slot_id] = queue
        moves.append(Move(MoveKind.SPAWN, host, slot_id, None, queue))
        if used + 1 < 0:
            heapq.heappush(free, (used + 1, host))
        missing[queue] -= 1
        if missing[queue]:
            turn.append(queue)
    return moves


def _newest(slot_id: str) -> tuple[int, str]:
    return slot_number(slot_id), slot_id


class StaticPolicy:
    """Fixed counts sized to mean demand; lost slots come back where capacity allows."""

    name = "static"

    def __init__(self, scenario: Scenario) -> None:
        self.counts = static_counts(scenario)

    def decide(
        self,
        now_s: float,
        current: SlotMap,
        stats: Mapping[str, QueueStats],
        hosts: Sequence[HostCapacity],
    ) -> list[Move]:
        return fill(current, self.counts, hosts)


class HpaPolicy:
    """Kubernetes HPA rule per queue, fed the planner's load (backlog included).

    desired = ceil(current x load / target); no change within 10% of the target; a
    scale-down takes the highest recommendation of the last 5 minutes.
    """

    name = "hpa"

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.history: dict[str, deque[tuple[float, int]]] = {q: deque() for q in scenario.queues}

    def recommend(self, queue: str, current_slots: int, stats: QueueStats) -> int:
        config = self.scenario.queues[queue]
        demand = queue_demand(
            stats,
            batch_size=config.batch_size,
            current_slots=current_slots,
            target_load=self.scenario.target_load,
        )
        if current_slots == 0:
            # HPA cannot scale from zero; KEDA-style activation starts one slot.
            wanted = 1 if stats.waiting_jobs > 0 else 0
        elif stats.slot_lifetime_s <= 0:
            wanted = current_slots
        else:
            ratio = demand.load / self.scenario.target_load
            if abs(ratio - 1) <= HPA_TOLERANCE:
                wanted = current_slots
            else:
                wanted = math.ceil(current_slots * ratio)
        return max(config.min_slots, min(config.max_slots, wanted))

    def decide(
        self,
        now_s: float,
        current: SlotMap,
        stats: Mapping[str, QueueStats],
        hosts: Sequence[HostCapacity],
    ) -> list[Move]:
        counts = current.counts()
        desired = {}
        for queue in sorted(self.scenario.queues):
            current_slots = counts.get(queue, 0)
            wanted = self.recommend(queue, current_slots, stats.get(queue, NO_STATS))
            history = self.history[queue]
            history.append((now_s, wanted))
            while history and history[0][0] < now_s - HPA_SCALE_DOWN_WINDOW_S:
                history.popleft()
            if wanted < current_slots:
                wanted = min(current_slots, max(n for _, n in history))
            desired[queue] = wanted
        return fill(current, desired, hosts)
