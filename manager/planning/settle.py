"""Counts in a short cluster (pure): a queue keeps its count near its fair share, and a queue
held hot below its share takes from cooler ones; and the highest load a held count may run at.

Called by manager/planning/planner.py after the fair shares (`allocate`); docs/DESIGN.md section 3.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Mapping

from config.models import QueueConfig

# Whatever the band, a queue is not held at a count it would run above this load: at 0.8
# target, priority 0's 30% band let a queue run at 104% with its backlog growing (hosts_lost:
# archive lost a fifth of its slots and stayed at the reduced count, p99 19 s).
MAX_HELD_LOAD = 0.9
# When the cluster is short, a queue keeps its current count while it is this close to its
# fair share (a fraction of the count, at least one slot): shares recomputed from noisy
# windows moved a slot back and forth between queues at every plan (hosts_lost with the
# capacity tiers: 180 moves without this, 57 with it; 65 before the tiers).
SHARE_BAND = 0.15
# In a short cluster, a queue whose need (busy slots + its backlog over a window) is this
# many slots above its count is not held there by SHARE_BAND: the band kept hosts_lost's
# archive at 43 slots, 100% busy with its backlog growing, beside 24 idle slots of higher
# priorities. The margin keeps a need that only touches the count from trading a slot
# at every plan (hosts_lost seed 11: 180 moves at 0 slots, 161 at 2; HPA 163).
DEFICIT_SLOTS = 2.0
# SHARE_BAND held a queue below its fair share at any load: hosts_lost's archive (priority 0,
# jobs of 10 s) sat at 42-44 slots, 91-98% busy, for 1,100 s beside a fair share of 47,
# while the higher priorities ran at 70-80% (p99 4.7 s against a 3.4 s limit, seed 5).
# Such a queue now takes slots from a queue above its share while the giver stays this
# much cooler after the move than the taker: two hot queues side by side traded a slot at
# every plan when the hotter simply took (hosts_lost: 790-1100 moves over 4 seeds).
HOT_MARGIN = 0.05


def settle(
    fair: Mapping[str, int], current: Mapping[str, int], desired: Mapping[str, int],
    queues: Mapping[str, QueueConfig], *, capacity_slots: int,
    need: Mapping[str, float],
) -> dict[str, int]:
    """Keep each queue's current count where it is within SHARE_BAND of its fair share
    (unless its need is more than DEFICIT_SLOTS above that count and its share higher, or
    it has no slot and a share), move
    slots to the queues kept below their share at a load above MAX_HELD_LOAD from cooler
    queues kept above theirs (relieve_hot), then bring the total back to capacity: the
    queues kept above their share give back first (lowest priority first), and room left
    goes to the queues below theirs (highest first)."""
    settled: dict[str, int] = {}
    for queue, share in fair.items():
        now = current.get(queue, 0)
        band = max(1, round(SHARE_BAND * now))
        kept = abs(share - now) <= band and queues[queue].min_slots <= now <= desired[queue]
        if share > now and need.get(queue, 0.0) > now + DEFICIT_SLOTS:
            kept = False
        if now == 0 and share > 0:
            # None against a share is not noise around the share but a queue not served at
            # all: held, 36 of 60 queues with work stayed at none for a stats window beside
            # 24 slots idle on queues with nothing left (more queues than slots).
            kept = False
        settled[queue] = now if kept else share
    relieve_hot(settled, fair, need, queues)
    by_priority = sorted(fair, key=lambda q: (-queues[q].priority, q))
    over = sum(settled.values()) - capacity_slots
    for queue in reversed(by_priority):
        if over <= 0:
            break
        give = min(over, max(0, settled[queue] - fair[queue]))
        settled[queue] -= give
        over -= give
    room = capacity_slots - sum(settled.values())
    for queue in by_priority:
        if room <= 0:
            break
        take = min(room, max(0, fair[queue] - settled[queue]))
        settled[queue] += take
        room -= take
    return settled


def relieve_hot(
    settled: dict[str, int], fair: Mapping[str, int], need: Mapping[str, float],
    queues: Mapping[str, QueueConfig],
) -> None:
    """In place: a queue settled below its fair share at a load (need / count) above
    MAX_HELD_LOAD takes slots, one at a time, from queues settled above theirs, the
    coolest giver first, while the giver's load after giving stays HOT_MARGIN below the
    taker's after taking (hottest taker first, up to its share)."""
    def load(queue: str, count: int) -> float:
        return need.get(queue, 0.0) / count if count > 0 else math.inf

    def can_give(queue: str) -> bool:
        return settled[queue] > fair[queue] and settled[queue] - 1 >= max(queues[queue].min_slots, 1)

    hot = sorted((q for q in settled if 0 < settled[q] < fair[q]
                  and load(q, settled[q]) > MAX_HELD_LOAD),
                 key=lambda q: (-load(q, settled[q]), q))
    if not hot:
        return
    givers = [(load(q, settled[q] - 1), q) for q in settled if can_give(q)]
    heapq.heapify(givers)
    for queue in hot:
        while settled[queue] < fair[queue] and givers:
            after, giver = givers[0]
            if after + HOT_MARGIN > load(queue, settled[queue] + 1):
                break
            heapq.heappop(givers)
            settled[giver] -= 1
            settled[queue] += 1
            if can_give(giver):
                heapq.heappush(givers, (load(giver, settled[giver] - 1), giver))
