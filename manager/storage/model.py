"""The planner's data: the slot map, per-queue window stats, host capacities, and a plan."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum, auto

# host -> slot id -> queue. Treat as read-only: plans share these dicts.
Assignments = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class SlotMap:
    """Which queue each slot works on, per host. Slot ids are unique across the cluster."""

    hosts: Assignments

    @classmethod
    def empty(cls) -> SlotMap:
        return cls(hosts={})

    def counts(self) -> dict[str, int]:
        """Slots per queue over all hosts in the map."""
        result: dict[str, int] = {}
        for slots in self.hosts.values():
            for queue in slots.values():
                result[queue] = result.get(queue, 0) + 1
        return result

    def host_counts(self, queue: str) -> dict[str, int]:
        """Slots of one queue per host (hosts without any are left out)."""
        result: dict[str, int] = {}
        for host, slots in self.hosts.items():
            n = sum(1 for q in slots.values() if q == queue)
            if n:
                result[host] = n
        return result

    def total_slots(self) -> int:
        return sum(len(slots) for slots in self.hosts.values())


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue over the stats window.

    busy_s and slot_lifetime_s are slot-seconds inside the window: a slot alive for the
    whole 60 s window adds 60 to slot_lifetime_s; a batch still running adds its time so far.
    """

    waiting_jobs: int = 0
    jobs_done: int = 0
    busy_s: float = 0.0
    slot_lifetime_s: float = 0.0
    window_s: float = 60.0
    # The queue's job time measured before the window (manager/cold.py remembers it), for a
    # queue idle through the window: 0 when never measured.
    known_job_s: float = 0.0


@dataclass(frozen=True, slots=True)
class HostCapacity:
    host: str
    capacity_slots: int
    alive: bool = True


class MoveKind(StrEnum):
    RETARGET = auto()  # the slot finishes its batch, then works on to_queue
    SPAWN = auto()  # the master forks a new slot for to_queue
    STOP = auto()  # the slot finishes its batch and exits


@dataclass(frozen=True, slots=True)
class Move:
    kind: MoveKind
    host: str
    slot_id: str
    from_queue: str | None
    to_queue: str | None


@dataclass(frozen=True, slots=True)
class QueuePlan:
    """What the dashboard shows for one queue.

    load: work in the window (busy + time the waiting jobs need) over slot lifetime;
    above 1.0 the queue is behind. math.inf when work waits and no slot lived.
    demand_slots: the slots that would run the work at the target load.
    desired_slots: demand after the dead band and min/max; planned_slots: after capacity.
    slots: the count in the new map, which may exceed planned_slots: idle slots stay on
    their queue until another queue needs the capacity.
    """

    queue: str
    priority: int
    load: float
    demand_slots: float
    desired_slots: int
    planned_slots: int
    slots: int


@dataclass(frozen=True, slots=True)
class Plan:
    slot_map: SlotMap
    queues: Mapping[str, QueuePlan]
    moves: tuple[Move, ...]

    def planned_counts(self) -> dict[str, int]:
        """Slots planned per queue (a burst plan: its bursting queues only)."""
        return {name: queue.planned_slots for name, queue in self.queues.items()}

    def move_counts(self) -> dict[MoveKind, int]:
        result = {kind: 0 for kind in MoveKind}
        for move in self.moves:
            result[move.kind] += 1
        return result
