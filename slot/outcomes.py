"""What a finished batch sends to the queue server (pure): replies, one DONE, the jobs given
back by a retarget (one LATER ... FRONT), LATERs, FAILs.

Also the retry verdict of a failed job when its handler class overrides the queue's retry
policy: the slot (or the master, for a crashed slot's jobs) then decides the delay or the
death itself and sends it with FAIL; otherwise FAIL goes without DELAY and the queue
server applies the queue's policy.
"""
from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from queue_server.protocol.retry import RetryPolicy
from slot.handler import Handler, Outcome, SlotJob
from slot.reply_key import Reply


@dataclass(frozen=True, slots=True)
class Failure:
    """One FAIL request: `delay_s` None leaves the delay (and the death) to the queue's policy."""

    id: int
    error: str
    delay_s: float | None = None
    dead: bool = False
    solo: bool = False


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    replies: list[Reply]
    # delay (None: at once) -> ids postponed with it
    later: dict[float | None, list[int]]
    failures: list[Failure]
    done: list[int]
    # Given back by a retarget, in the batch's order: LATER ... FRONT (slot/retarget.py).
    front: list[int]
    # Done with a result (job.result() or handle_job's return value): DONE ... RESULT each.
    results: list[tuple[int, bytes]] = field(default_factory=list)


def handler_policy(cls: type[Handler], queue_policy: RetryPolicy) -> RetryPolicy | None:
    """The handler's own retry policy when it overrides any figure of the queue's, else None."""
    overrides = (cls.max_attempts, cls.retry_base_s, cls.retry_max_s)
    if all(value is None for value in overrides):
        return None
    return RetryPolicy(
        max_attempts=queue_policy.max_attempts if cls.max_attempts is None else cls.max_attempts,
        retry_base_s=queue_policy.retry_base_s if cls.retry_base_s is None else cls.retry_base_s,
        retry_max_s=queue_policy.retry_max_s if cls.retry_max_s is None else cls.retry_max_s,
    )


def failure(
    job_id: int,
    error: str,
    *,
    attempt: int | None,
    policy: RetryPolicy | None,
    rng: random.Random,
    give_up: bool = False,
    solo: bool = False,
) -> Failure:
    """The FAIL of one job: with a handler policy, its own delay or death; else the queue's."""
    if give_up:
        return Failure(job_id, error, dead=True, solo=solo)
    if policy is None:
        return Failure(job_id, error, solo=solo)
    # A server that does not count attempts (no KEYS) leaves us at the first one.
    runs = attempt or 1
    if policy.is_exhausted(runs):
        return Failure(job_id, error, dead=True, solo=solo)
    return Failure(job_id, error, delay_s=round(policy.delay_s(runs, rng), 3), solo=solo)


def fail_unresolved(jobs: Sequence[SlotJob], exc: BaseException) -> int:
    """handle() raised: every job it had not resolved fails with the traceback; resolved jobs
    keep their outcome. With more than one such job the exception cannot tell which one was
    to blame, so they are failed SOLO: each runs alone next time. Returns how many failed."""
    unresolved = [job for job in jobs if not job.resolved]
    for job in unresolved:
        job.fail(exc)
        job.solo = len(unresolved) > 1
    return len(unresolved)


def acknowledgement(
    jobs: Sequence[SlotJob], *, policy: RetryPolicy | None, rng: random.Random
) -> Acknowledgement:
    """Sort a handled batch into the requests that acknowledge it."""
    replies = [
        Reply(job.id, job.item, job.reply_data)
        for job in jobs
        if job.reply_data is not None and job.item is not None
    ]
    later: dict[float | None, list[int]] = defaultdict(list)
    failures: list[Failure] = []
    done: list[int] = []
    front: list[int] = []
    results: list[tuple[int, bytes]] = []
    for job in jobs:
        outcome = job.outcome
        if outcome is Outcome.DONE:  # first: nearly every job, one test on the all-good path
            if job.result_data is None:
                done.append(job.id)
            else:
                results.append((job.id, job.result_data))
        elif outcome is Outcome.LATER:
            later[job.delay_s].append(job.id)
        elif outcome is Outcome.FAILED:
            failures.append(failure(
                job.id, job.error or "failed", attempt=job.attempt, policy=policy, rng=rng,
                give_up=job.give_up, solo=job.solo,
            ))
        else:
            front.append(job.id)
    return Acknowledgement(replies, dict(later), failures, done, front, results)
