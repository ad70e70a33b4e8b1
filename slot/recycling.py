"""When a slot leaves to be forked afresh after a number of jobs or an age (pure).

The queue's limits come with the slot's Assignment (and change with it on a retarget); each
slot draws its place in the jitters once, at its start, like gunicorn's worker does
(`max_requests + randint(0, max_requests_jitter)`), so slots forked together leave apart.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from slot.beacon import Assignment
from slot.exit_codes import SlotExit


@dataclass(frozen=True, slots=True)
class JitterDraw:
    """A slot's place in its queue's jitters: each in [0, 1), scaled by the jitter in force."""

    jobs: float
    age: float

    @classmethod
    def draw(cls, rng: random.Random) -> JitterDraw:
        return cls(rng.random(), rng.random())


@dataclass(frozen=True, slots=True)
class Recycle:
    """Why a slot leaves: its exit code and the log's words."""

    exit_code: SlotExit
    why: str


def job_limit(assignment: Assignment, draw: JitterDraw) -> int | None:
    """The jobs this slot takes before it leaves (None: no limit): the limit plus a whole
    number between 0 and the jitter, each equally likely."""
    if not assignment.max_jobs_per_slot:
        return None
    return assignment.max_jobs_per_slot + int(draw.jobs * (assignment.max_jobs_per_slot_jitter + 1))


def age_limit_s(assignment: Assignment, draw: JitterDraw) -> float | None:
    """The age in seconds past which this slot leaves (None: no limit)."""
    if not assignment.max_slot_age_s:
        return None
    return assignment.max_slot_age_s + draw.age * assignment.max_slot_age_jitter_s


def jobs_left(assignment: Assignment, draw: JitterDraw, *, jobs_taken: int) -> int | None:
    """Jobs the slot may still take (None: no limit): its last fetch asks for no more, so it
    runs exactly its limit."""
    limit = job_limit(assignment, draw)
    return None if limit is None else max(0, limit - jobs_taken)


def recycle_due(assignment: Assignment, draw: JitterDraw, *, jobs_taken: int, batches: int,
                age_s: float) -> Recycle | None:
    """Whether the slot leaves now, between batches. By age only once it has run a batch: a
    slot younger than a fork plus its setup() would otherwise leave before its first fetch,
    and an idle queue's slots would be re-forked for ever, serving nothing."""
    jobs = job_limit(assignment, draw)
    if jobs is not None and jobs_taken >= jobs:
        return Recycle(SlotExit.MAX_JOBS, f"took {jobs_taken} jobs (max_jobs_per_slot "
                                          f"{assignment.max_jobs_per_slot}, {jobs} with its jitter)")
    age = age_limit_s(assignment, draw)
    if age is not None and batches > 0 and age_s >= age:
        return Recycle(SlotExit.MAX_AGE, f"{age_s:.1f} s old (max_slot_age_s "
                                         f"{assignment.max_slot_age_s:g}, {age:.1f} s with its jitter)")
    return None
