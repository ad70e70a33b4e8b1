"""Permits in a slot: the handler's `self.limiter`, and the before_batch hook that paces a
batch job by job. The handler-facing names of the pulsar (slot/pulsar/) are here too, so handler
code imports only this module.

In a handler of a queue with a `rate_limit`, each job waits for its permit when handle()
reaches it (iterating or indexing the batch), so calls go out spaced by the rate, never
as a burst of a whole batch; the handler says how each call went:

    for job in jobs:                         # one permit per job, taken here
        response = api.send(job.json())
        if response.status == 429:
            self.limiter.slow_down()         # the rate is cut for every slot
            job.later(delay=1)
        elif response.status == 503:
            self.limiter.pause(60)           # no permits for a minute, cluster-wide
            job.later(delay=60)
        else:
            self.limiter.ok()                # lets a cut rate climb back

A handler that makes its own calls (several per job, or one per batch) sets
`permits_per_job = False` and calls `self.limiter.acquire()` before each one.
Lower level, any limiter by name:

    from slot.permits import OK, SLOW_DOWN, PermitClient, pause

    permits = PermitClient()                 # SLOTMAP_PULSAR or tcp://127.0.0.1:7510
    permits.acquire("ga")                    # blocks until the cluster may make one more call
    try:
        call_the_api()
    except RateLimited:
        permits.report("ga", SLOW_DOWN)      # the rate is cut for every slot
    except DailyLimitExceeded:
        permits.report("ga", pause(3600))    # no permits for an hour
    else:
        permits.report("ga", OK)             # lets a cut rate climb back
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import overload

from config.models import QueueConfig
from slot.errors import JobResolutionError
from slot.handler import Outcome, SlotJob, registered_handlers
from slot.limiter import SlotLimiter, limiter_for, use_permit_client
from slot.pulsar.client import PermitClient, Taken
from slot.pulsar.errors import PermitError, PermitTimeout
from slot.pulsar.protocol import OK, SLOW_DOWN, pause

__all__ = [
    "OK", "SLOW_DOWN", "PermitClient", "PermitError", "PermitTimeout", "RateLimitHook",
    "SlotLimiter", "limiter_for", "limiters_of", "pause", "rate_limit_hook",
]

log = logging.getLogger(__name__)

# How long the before_batch hook waits for one job's permit before postponing the rest.
HOOK_MAX_WAIT_S = 30.0


def limiters_of(queues: Mapping[str, QueueConfig]) -> dict[str, str]:
    """Queue -> limiter name for every queue with a `rate_limit` (the limiter is named after it)."""
    return {name: name for name, queue in queues.items() if queue.rate_limit is not None}


# The slot's hook


BeforeBatch = Callable[[str, Sequence[SlotJob]], Sequence[SlotJob]]


class RateLimitHook:
    """A `before_batch` hook: one permit per job of a rate-limited queue's batch, taken when
    the handler reaches the job (PacedJobs), so a batch goes out at the rate, not as a burst.
    When a job's permit does not come within `max_wait_s`, it and the jobs after it are
    postponed (LATER) until the next permit may come, so a slot never holds a locked batch
    through a long pause. A handler class with `permits_per_job = False` gets its batch as
    is and takes permits itself (self.limiter.acquire()). A handler that went through none
    of its batch (a no-op, one call for all) still pays its permits before its next batch,
    and from then on its batches take their permits before it runs."""

    def __init__(
        self,
        client: PermitClient,
        limiters: Mapping[str, str],
        *,
        max_wait_s: float = HOOK_MAX_WAIT_S,
        stopping: Callable[[], bool] | None = None,
    ) -> None:
        self.client = client
        self.limiters = dict(limiters)
        self.max_wait_s = max_wait_s
        self.stopping = stopping
        # The last batch handed out: the permits of the jobs its handler never reached are
        # taken before the next batch, so every job costs one permit whatever the handler does.
        self._last: PacedJobs | None = None
        # Queues whose handler went through none of its batch (a no-op, or one call for the
        # whole batch): their batches take every permit before the handler runs.
        self._upfront: set[str] = set()
        use_permit_client(client, self.limiters)

    def __call__(self, queue: str, jobs: Sequence[SlotJob]) -> Sequence[SlotJob]:
        """The batch, paced: each job's permit is taken when the handler reaches it."""
        self._settle_last()
        limiter = self.limiters.get(queue)
        if limiter is None or not jobs:
            return jobs
        handler = registered_handlers().get(queue)
        if handler is not None and not handler.permits_per_job:
            return jobs
        if queue in self._upfront:
            return self._take_upfront(queue, limiter, jobs)
        self._last = PacedJobs(queue, jobs, lambda: self._take_one(queue, limiter))
        return self._last

    def _take_upfront(self, queue: str, limiter: str, jobs: Sequence[SlotJob]) -> Sequence[SlotJob]:
        """Every permit of the batch first; the jobs whose permits do not come are postponed."""
        try:
            taken = self.client.take(limiter, len(jobs), wait_s=self.max_wait_s, stopping=self.stopping)
        except PermitError as exc:
            log.error("no permits for queue %s (%s)", queue, exc)
            taken = Taken(0, self.max_wait_s)
        for job in jobs[taken.granted :]:
            job.later(delay_s=taken.retry_after_s)
        return jobs[: taken.granted]

    def _settle_last(self) -> None:
        """A handler that did not go through its batch (one call for all, or none) still
        spends one permit per job: taken now, before its next batch, so the rate holds."""
        last, self._last = self._last, None
        owed = 0 if last is None else last.unreached()
        if last is None or owed == 0:
            return
        if owed == len(last):
            self._upfront.add(last.queue)
        limiter = self.limiters[last.queue]
        try:
            self.client.take(limiter, owed, wait_s=self.max_wait_s, stopping=self.stopping)
        except PermitError as exc:
            log.error("could not take the %d permits owed by the last batch of %s (%s)",
                      owed, last.queue, exc)

    def _take_one(self, queue: str, limiter: str) -> Taken:
        try:
            return self.client.take(limiter, 1, wait_s=self.max_wait_s, stopping=self.stopping)
        except PermitError as exc:
            log.error("no permits for queue %s (%s)", queue, exc)
            return Taken(0, self.max_wait_s)


class PacedJobs(Sequence[SlotJob]):
    """A batch whose jobs are let through one permit at a time, in order, when the handler
    first reaches them (iteration or index). When a permit does not come, that job and every
    later one are postponed and iteration ends there (an index raises PermitTimeout)."""

    def __init__(self, queue: str, jobs: Sequence[SlotJob], take_one: Callable[[], Taken]) -> None:
        self.queue = queue
        self._jobs = list(jobs)
        self._take_one = take_one
        self._admitted = 0
        self._closed = False

    def __len__(self) -> int:
        return len(self._jobs)

    def __iter__(self) -> Iterator[SlotJob]:
        for index, job in enumerate(self._jobs):
            if not self._admit(index):
                return
            yield job

    @overload
    def __getitem__(self, index: int) -> SlotJob: ...
    @overload
    def __getitem__(self, index: slice) -> list[SlotJob]: ...

    def __getitem__(self, index: int | slice) -> SlotJob | list[SlotJob]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._jobs)))]
        job = self._jobs[index]
        if not self._admit(index % len(self._jobs)):
            raise PermitTimeout(f"job {job.id} of {self.queue} was postponed: no permit in time")
        return job

    def unreached(self) -> int:
        """Jobs the handler never reached and nothing resolved: not postponed for want of a
        permit, nor given back by a retarget (slot/retarget.py), which ran no call."""
        if self._closed:
            return 0
        return sum(not job.resolved for job in self._jobs[self._admitted :])

    def _admit(self, index: int) -> bool:
        while self._admitted <= index:
            if self._closed:
                return False
            taken = self._take_one()
            if taken.granted:
                self._admitted += 1
                continue
            self._postpone_rest(taken)
            return False
        return True

    def _postpone_rest(self, taken: Taken) -> None:
        self._closed = True
        rest = [job for job in self._jobs[self._admitted :] if job.outcome is Outcome.DONE
                and job.reply_data is None]
        for job in rest:
            # A job the handler already resolved (done on purpose) keeps its outcome.
            with contextlib.suppress(JobResolutionError):
                job.later(delay_s=taken.retry_after_s)
        log.info("%d of %d jobs of %s postponed by %.2f s: %s", len(rest), len(self._jobs),
                 self.queue, taken.retry_after_s,
                 "no reply from the pulsar" if not taken.reachable else "no permit in time")


def rate_limit_hook(
    client: PermitClient,
    queues: Mapping[str, QueueConfig],
    *,
    max_wait_s: float = HOOK_MAX_WAIT_S,
    stopping: Callable[[], bool] | None = None,
) -> RateLimitHook:
    """The before_batch hook for the queues of a cluster config that have a `rate_limit`."""
    return RateLimitHook(client, limiters_of(queues), max_wait_s=max_wait_s, stopping=stopping)
