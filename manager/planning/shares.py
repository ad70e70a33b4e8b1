"""Shares of a short cluster (pure): desired counts fitted into capacity by priority weight,
tier by tier, and whole slots handed out by largest remainder, taking turns at the last slot.

Called by manager/planning/planner.py (docs/DESIGN.md section 3). A queue with no slot
planned competes for its first by its turn (`Turn`): the part of a slot it would use, less
the slots it held over the window. Ranked by the bare remainder, every queue due a fraction
of a slot had the same one (60 queues with work, 24 slots: 0.4 each) and names broke the
tie: the first 24 queues held the slots, idle once their jobs were done, while the other
36 waited with work for the whole 60 s stats window (real processes, 127 s of the run with
queues waiting beside idle slots).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from config.models import QueueConfig

# Each priority step doubles a queue's claim on contested capacity; bounded so that
# 2 ** priority stays a finite float for any configured integer.
MAX_WEIGHT_EXPONENT = 60
# Absorbs float error in demand before rounding up (2.0000000001 slots is 2 slots).
EPSILON_SLOTS = 1e-9


@dataclass(frozen=True, slots=True)
class Turn:
    """What ranks a queue for its first whole slot: `need`, the slots that keep it up
    (a queue with jobs waiting and no work measured needs one); `served`, the slots it held
    on average over the stats window."""

    need: float
    served: float

    def rank(self, left_over: float) -> float:
        """The remainder a queue with no slot planned competes with: no more of a slot than
        it would use (an idle queue's 0.03 does not tie with a backlog's 0.4), less the slot
        time it had in the window, so that queues due a fraction of a slot take turns
        (the one served least goes first; one plan's slot, 5 s of 60, is 0.08)."""
        return min(left_over, self.need) - min(self.served, 1.0)


def priority_weight(priority: int) -> float:
    return 2.0 ** max(-MAX_WEIGHT_EXPONENT, min(MAX_WEIGHT_EXPONENT, priority))




# The tier of capacity_tiers shared evenly (by the count missing, whatever the priority).
EVEN_TIER = 1


def allocate(
    desired: Mapping[str, int], queues: Mapping[str, QueueConfig], *, capacity_slots: int,
    tiers: Sequence[Mapping[str, int]] = (), turns: Mapping[str, Turn] | None = None,
) -> dict[str, int]:
    """Fit desired counts into capacity: minimums by priority, then each of `tiers` and last
    the desired counts, each shared by priority-weighted demand; a queue with nothing
    planned yet is ranked for its first slot by its turn in `turns`, if there."""
    if sum(desired.values()) <= capacity_slots:
        return dict(desired)
    order = sorted(desired, key=lambda q: (-queues[q].priority, q))
    planned: dict[str, int] = {}
    left = capacity_slots
    for queue in order:
        planned[queue] = min(queues[queue].min_slots, desired[queue], left)
        left -= planned[queue]
    for index, tier in enumerate([*tiers, desired]):
        extra = {q: min(tier.get(q, 0), desired[q]) - planned[q] for q in order
                 if min(tier.get(q, 0), desired[q]) > planned[q]}
        first = {q: turn for q, turn in (turns or {}).items() if q in extra and planned[q] == 0}
        shares = _weighted_shares(extra, queues, left, even=index == EVEN_TIER, turns=first)
        for queue, share in shares.items():
            planned[queue] += share
        left -= sum(shares.values())
    return planned


def _weighted_shares(
    extra: Mapping[str, int], queues: Mapping[str, QueueConfig], capacity_slots: int,
    *, even: bool = False, turns: Mapping[str, Turn] | None = None,
) -> dict[str, int]:
    """Water-fill: share proportional to weight x extra demand, none above its extra demand;
    the slots left after rounding down go by largest remainder, except that the queues in
    `turns` left with none compete by their turn for their first (`first_slots`)."""
    if capacity_slots <= 0 or not extra:
        return {}
    order = sorted(extra, key=lambda q: (-queues[q].priority, q))
    weights = {q: 1.0 if even else priority_weight(queues[q].priority) for q in order}
    exact = _water_fill(extra, weights, order, capacity_slots)
    shares = {q: min(extra[q], math.floor(exact[q] + EPSILON_SLOTS)) for q in order}
    left = capacity_slots - sum(shares.values())
    remainder = {q: exact[q] - shares[q] for q in order}
    remainder |= first_slots(shares, weights, order, max(left, 0), turns or {})
    by_remainder = sorted(
        (q for q in order if shares[q] < extra[q]),
        key=lambda q: (-remainder[q], -queues[q].priority, q),
    )
    for queue in by_remainder[: max(left, 0)]:
        shares[queue] += 1
    return shares


def first_slots(
    shares: Mapping[str, int], weights: Mapping[str, float], order: Sequence[str], left: int,
    turns: Mapping[str, Turn],
) -> dict[str, float]:
    """The ranks of the queues in `turns` rounded down to no slot, for the `left` slots: each
    one's weighted part of those slots were each asking for one (the same for equal
    priorities, however long the backlogs), taken by turn (Turn.rank). By each queue's own
    remainder, the longest backlogs (the queues that had slots: their backlog compounds on
    their count) took the slots at every plan, and the rest never had one."""
    waiting = [q for q in order if shares[q] == 0 and q in turns]
    if not waiting or left <= 0:
        return {}
    part = _water_fill({q: 1 for q in waiting}, weights, waiting, left)
    return {q: turns[q].rank(part[q]) for q in waiting}


def _water_fill(
    extra: Mapping[str, int], weights: Mapping[str, float], order: Sequence[str], capacity_slots: int,
) -> dict[str, float]:
    """Exact shares of `capacity_slots`, proportional to weight x extra, none above its
    extra (`order`: the queues by falling weight, then name)."""
    saturated_slots = 0
    weighted_rest = sum(weights[q] * extra[q] for q in order)
    ratio = 0.0
    saturated: set[str] = set()
    for queue in order:
        ratio = (capacity_slots - saturated_slots) / weighted_rest
        if ratio * weights[queue] < 1:
            break
        saturated.add(queue)
        saturated_slots += extra[queue]
        weighted_rest -= weights[queue] * extra[queue]
    return {q: float(extra[q]) if q in saturated else ratio * weights[q] * extra[q] for q in order}
