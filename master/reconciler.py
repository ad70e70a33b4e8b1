"""The desired slot map vs the running slots: which slot to fork, retarget or stop (pure)."""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

# Queue -> how many slots (the static map, or the manager's per-host counts).
SlotCounts = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class SlotAssignment:
    """Slot id -> queue, as the manager assigns it: slots keep their queue from plan to plan."""

    slots: Mapping[int, str]


@dataclass(frozen=True, slots=True)
class Spawn:
    slot_id: int
    queue: str


@dataclass(frozen=True, slots=True)
class Retarget:
    slot_id: int
    queue: str


@dataclass(frozen=True, slots=True)
class Stop:
    slot_id: int


Change = Spawn | Retarget | Stop


def assign(
    current: Mapping[int, str],
    desired: SlotCounts,
    *,
    capacity: int,
    priorities: Mapping[str, int],
    held_ids: Collection[int] = (),
) -> dict[int, str]:
    """Turn per-queue counts into slot id -> queue, changing as few slots as possible.

    Over capacity, higher-priority queues are served first. A slot keeps its queue while
    that queue still wants it; surplus slots move to queues short of slots (retargeting
    beats kill + fork); the rest of the shortfall gets new ids, never one in `held_ids`
    (slots still on their way out).
    """
    wanted = _cap(desired, capacity=capacity, priorities=priorities)
    target: dict[int, str] = {}
    surplus: list[int] = []
    for slot_id in sorted(current):
        queue = current[slot_id]
        if wanted.get(queue, 0) > 0:
            target[slot_id] = queue
            wanted[queue] -= 1
        else:
            surplus.append(slot_id)
    short = [queue for queue in _by_priority(wanted, priorities) for _ in range(wanted[queue])]
    for slot_id, queue in zip(surplus, short, strict=False):
        target[slot_id] = queue
    unused_ids = (n for n in range(len(current) + len(held_ids) + len(short) + 1)
                  if n not in current and n not in held_ids)
    for queue, slot_id in zip(short[len(surplus):], unused_ids, strict=False):
        target[slot_id] = queue
    return target


def changes(current: Mapping[int, str], target: Mapping[int, str]) -> list[Change]:
    """The moves from `current` to `target` (both slot id -> queue): stops first, since they
    free memory the forks need."""
    stops: list[Change] = [Stop(slot_id) for slot_id in sorted(current) if slot_id not in target]
    moves: list[Change] = []
    for slot_id in sorted(target):
        queue = target[slot_id]
        if slot_id not in current:
            moves.append(Spawn(slot_id, queue))
        elif current[slot_id] != queue:
            moves.append(Retarget(slot_id, queue))
    return stops + moves


@dataclass(slots=True)
class Reconciler:
    """Holds the desired slot map; `target()` resolves it against the running slots.

    Until a manager exists the master feeds it the static map once; later the manager's
    assignments go through the same `apply_slot_map`.
    """

    handled_queues: frozenset[str]
    priorities: Mapping[str, int] = field(default_factory=dict)
    desired: SlotCounts | SlotAssignment = field(default_factory=dict)
    # Unhandled queues already reported: each is logged once, not every tick.
    reported_unhandled: set[str] = field(default_factory=set)

    def apply_slot_map(self, desired: SlotCounts | SlotAssignment) -> None:
        self.desired = desired

    def wanted_queues(self) -> set[str]:
        """Queues the desired map gives at least one slot."""
        if isinstance(self.desired, SlotAssignment):
            return set(self.desired.slots.values())
        return {q for q, n in self.desired.items() if n > 0}

    def unhandled_queues(self) -> list[str]:
        """Queues the desired map names that no loaded handler serves (they get no slots)."""
        return sorted(self.wanted_queues() - self.handled_queues)

    def newly_unhandled(self) -> list[str]:
        """The unhandled queues not reported yet (each is reported once)."""
        new = [queue for queue in self.unhandled_queues() if queue not in self.reported_unhandled]
        self.reported_unhandled.update(new)
        return new

    def target(
        self, current: Mapping[int, str], *, capacity: int, held_ids: Collection[int],
        ceiling: int | None = None,
    ) -> dict[int, str]:
        """`capacity` bounds this host by memory, max_slots and load; `ceiling` (memory and
        max_slots alone, default `capacity`) bounds the manager's assignment: the manager
        plans within the load bound this host reports and goes over it only for the queues'
        configured minimums (manager/planning/minimum_room.py), which the load must not starve."""
        if isinstance(self.desired, SlotAssignment):
            bound = capacity if ceiling is None else max(capacity, ceiling)
            ids = sorted(i for i, q in self.desired.slots.items() if q in self.handled_queues)
            return {slot_id: self.desired.slots[slot_id] for slot_id in ids[: max(0, bound)]}
        counts = {q: n for q, n in self.desired.items() if q in self.handled_queues}
        return assign(
            current, counts, capacity=capacity, priorities=self.priorities, held_ids=held_ids
        )


def _cap(desired: SlotCounts, *, capacity: int, priorities: Mapping[str, int]) -> dict[str, int]:
    left = max(0, capacity)
    capped: dict[str, int] = {}
    for queue in _by_priority(desired, priorities):
        capped[queue] = min(max(0, desired[queue]), left)
        left -= capped[queue]
    return capped


def _by_priority(counts: Mapping[str, int], priorities: Mapping[str, int]) -> list[str]:
    return sorted(counts, key=lambda queue: (-priorities.get(queue, 0), queue))
