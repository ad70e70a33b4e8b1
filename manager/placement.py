"""Where slots go (pure): planned per-queue counts + the current map -> the new map and moves.

Slots keep their queue. A queue that grows takes, per slot, the host where it has the
smallest share of the capacity; there it retargets an idle slot of a lower-priority queue,
else spawns into free capacity, else retargets one of an equal- or higher-priority queue.
A queue above its plan keeps its extra slots, idle and warm, until some queue needs them.
"""
from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping

from manager.model import Move, MoveKind, SlotMap

UNKNOWN_PRIORITY = -(2**63)  # a queue no longer in the config: its slots go first


def slot_number(slot_id: str) -> int:
    """The n of a "host:n" slot id; -1 for ids of another shape."""
    _, _, tail = slot_id.rpartition(":")
    return int(tail) if tail.isdigit() else -1


def _slot_key(slot_id: str) -> tuple[int, str]:
    return slot_number(slot_id), slot_id


class _Layout:
    """The map being built: mutable, private to one place() call."""

    def __init__(
        self,
        current: SlotMap,
        capacities: Mapping[str, int],
        planned: Mapping[str, int],
        priorities: Mapping[str, int],
        max_slots: Mapping[str, int],
    ) -> None:
        self.capacities = capacities
        self.priorities = priorities
        self.slots: dict[str, dict[str, str]] = {}
        self.by_queue: dict[str, dict[str, list[str]]] = {}
        self.next_number: dict[str, int] = {}
        self.count: dict[str, int] = {}
        self.moves: list[Move] = []
        for host in sorted(capacities):
            assigned = dict(current.hosts.get(host, {}))
            self.slots[host] = assigned
            lists: dict[str, list[str]] = {}
            for slot_id in sorted(assigned, key=_slot_key):
                queue = assigned[slot_id]
                lists.setdefault(queue, []).append(slot_id)
                self.count[queue] = self.count.get(queue, 0) + 1
            self.by_queue[host] = lists
            self.next_number[host] = max((slot_number(s) for s in assigned), default=0) + 1
        self.planned = {q: planned.get(q, 0) for q in set(planned) | set(self.count)}
        self.surplus = {q: self.count.get(q, 0) - n for q, n in self.planned.items()}
        self.forced = {
            q: self.count.get(q, 0) - max_slots[q] if q in max_slots else self.count.get(q, 0)
            for q in self.planned
        }
        self.sources = {
            host: sorted(lists, key=lambda q: (self.priority(q), q))
            for host, lists in self.by_queue.items()
        }
        self.source_index = {host: 0 for host in self.by_queue}

    def priority(self, queue: str) -> int:
        return self.priorities.get(queue, UNKNOWN_PRIORITY)

    def free(self, host: str) -> int:
        return self.capacities[host] - len(self.slots[host])

    def take(self, host: str, queue: str) -> str:
        """Remove the newest slot of queue on host from the books and return its id."""
        slot_id = self.by_queue[host][queue].pop()
        del self.slots[host][slot_id]
        self.count[queue] -= 1
        self.surplus[queue] -= 1
        self.forced[queue] -= 1
        return slot_id

    def put(self, host: str, queue: str, slot_id: str) -> None:
        self.slots[host][slot_id] = queue
        bisect.insort(self.by_queue[host].setdefault(queue, []), slot_id, key=_slot_key)
        self.count[queue] = self.count.get(queue, 0) + 1
        self.surplus[queue] = self.surplus.get(queue, 0) + 1
        self.forced[queue] = self.forced.get(queue, 0) + 1

    def source(self, host: str) -> str | None:
        """The lowest-priority queue with a spare slot on host (surplus only ever shrinks)."""
        queues = self.sources[host]
        index = self.source_index[host]
        while index < len(queues):
            queue = queues[index]
            if self.surplus[queue] > 0 and self.by_queue[host].get(queue):
                break
            index += 1
        self.source_index[host] = index
        return queues[index] if index < len(queues) else None

    def trim_overfull_hosts(self) -> None:
        """A host whose capacity shrank stops its least needed slots."""
        for host in sorted(self.slots):
            for _ in range(-self.free(host)):
                queue = min(
                    (q for q, ids in self.by_queue[host].items() if ids),
                    key=lambda q: (self.forced[q] <= 0, self.surplus[q] <= 0, self.priority(q), q),
                )
                slot_id = self.take(host, queue)
                self.moves.append(Move(MoveKind.STOP, host, slot_id, queue, None))

    def host_key(self, host: str, queue: str) -> tuple[float, int, int, str] | None:
        """Heap key of host for a slot of queue (smaller is better); None: no room there."""
        free = self.free(host)
        source = self.source(host)
        if source is not None and self.priority(source) < self.priority(queue):
            cost = 0
        elif free > 0:
            cost = 1
        elif source is not None:
            cost = 2
        else:
            return None
        share = len(self.by_queue[host].get(queue, ())) / max(self.capacities[host], 1)
        return share, cost, -free, host

    def grow(self, queue: str, need: int) -> None:
        heap = [key for host in self.slots if (key := self.host_key(host, queue)) is not None]
        heapq.heapify(heap)
        while need > 0 and heap:
            stale = heapq.heappop(heap)
            host = stale[3]
            key = self.host_key(host, queue)
            if key is None:
                continue
            if key != stale:
                heapq.heappush(heap, key)
                continue
            self.add_slot(host, queue, spawn=key[1] == 1)
            need -= 1
            key = self.host_key(host, queue)
            if key is not None:
                heapq.heappush(heap, key)

    def add_slot(self, host: str, queue: str, *, spawn: bool) -> None:
        if spawn:
            slot_id = f"{host}:{self.next_number[host]}"
            self.next_number[host] += 1
            self.moves.append(Move(MoveKind.SPAWN, host, slot_id, None, queue))
        else:
            source = self.source(host)
            assert source is not None, "host_key promised a source"
            slot_id = self.take(host, source)
            self.moves.append(Move(MoveKind.RETARGET, host, slot_id, source, queue))
        self.put(host, queue, slot_id)

    def stop_forced(self, queue: str) -> None:
        """Stop a queue's slots beyond its max (or all of a queue gone from the config)."""
        heap = [
            (-len(lists[queue]), host)
            for host, lists in self.by_queue.items()
            if lists.get(queue)
        ]
        heapq.heapify(heap)
        while self.forced[queue] > 0 and heap:
            _, host = heapq.heappop(heap)
            slot_id = self.take(host, queue)
            self.moves.append(Move(MoveKind.STOP, host, slot_id, queue, None))
            if self.by_queue[host][queue]:
                heapq.heappush(heap, (-len(self.by_queue[host][queue]), host))


def place(
    current: SlotMap,
    capacities: Mapping[str, int],
    planned: Mapping[str, int],
    *,
    priorities: Mapping[str, int],
    max_slots: Mapping[str, int],
) -> tuple[SlotMap, list[Move]]:
    """Lay planned counts onto the alive hosts in `capacities`, moving as few slots as possible.

    Hosts missing from `capacities` are dead: their slots are gone, with no move.
    The sum of planned counts must not exceed the total capacity.
    """
    layout = _Layout(current, capacities, planned, priorities, max_slots)
    layout.trim_overfull_hosts()
    growing = sorted(
        (q for q in layout.planned if layout.surplus[q] < 0),
        key=lambda q: (-layout.priority(q), q),
    )
    for queue in growing:
        layout.grow(queue, -layout.surplus[queue])
    for queue in sorted(layout.planned):
        if layout.forced[queue] > 0:
            layout.stop_forced(queue)
    return SlotMap(hosts=layout.slots), layout.moves
