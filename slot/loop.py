"""One slot's work as `step(now) -> StepResult`: fetch a batch, run the handler, DONE/LATER/FAIL.

The queue server and /proc are reached through the `JobSource` and `read_memory`
passed in, so the loop is driven by tests with fakes and by slot/process.py for real.
"""
from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum, auto
from typing import Protocol

from queue_server.protocol.retry import RetryPolicy
from slot.beacon import Assignment, SlotPhase
from slot.exit_codes import SlotExit
from slot.handler import Handler, QueueJob, SlotJob, set_outcome_hook
from slot.memory import MemoryUsage, MemoryWatch
from slot.outcomes import Failure, acknowledgement, fail_unresolved, handler_policy
from slot.recycling import JitterDraw, Recycle, jobs_left, recycle_due
from slot.reply_key import Reply
from slot.retarget import GivingBack
from slot.setup_notes import SetupError
from slot.setup_notes import describe as describe_setup_error

log = logging.getLogger(__name__)

RETRY_MIN_S = 0.1
RETRY_MAX_S = 5.0
NOT_MEASURED = MemoryUsage(0, 0, 0)


class StepKind(StrEnum):
    BATCH = auto()
    # The wait for jobs was interrupted (a retarget or a stop came in): step again.
    WOKEN = auto()
    # The queue server could not be used: wait `retry_after_s`, then step again.
    RETRY = auto()
    EXIT = auto()


@dataclass(frozen=True, slots=True)
class StepResult:
    kind: StepKind
    jobs: int = 0
    exit_code: SlotExit | None = None
    retry_after_s: float = 0.0


class JobSource(Protocol):
    """The queue server as the loop needs it. `fetch` blocks until at least one job is ready
    and returns None when woken before any job came; jobs carry their key and attempt."""

    def fetch(self, queue: str, *, count: int, lock_s: float) -> Sequence[QueueJob] | None: ...
    def done(self, ids: Sequence[int]) -> None: ...
    def done_with_result(self, job_id: int, result: bytes, *, max_bytes: int) -> None:
        """DONE ... RESULT (a result over `max_bytes` is not sent: a plain DONE, logged)."""
        ...
    def later(self, ids: Sequence[int], *, delay_s: float | None, front: bool = False) -> None:
        """`front`: back at the head of their priority, in this order (LATER ... FRONT)."""
        ...
    def fail(self, failures: Sequence[Failure]) -> int:
        """FAIL each (pipelined); returns how many of them are dead now."""
        ...
    def reply(self, queue: str, replies: Sequence[Reply], *,
              ttl_s: float | None = None) -> None: ...


class LeaseNotes(Protocol):
    """Tells the master which jobs this slot holds, before the handler runs: the master renews
    their locks while the slot lives and fails them at once if it dies (slot/leases.py)."""

    def hold(self, jobs: Sequence[SlotJob], *, lock_s: float, in_order: bool = False) -> None:
        """`in_order`: the handler runs the jobs one by one in this order (handle_job)."""
        ...
    def release(self) -> None: ...
    def started(self) -> None:
        """Once, before the first fetch: a death from now on is not a failed start."""
        ...
    def setup_failed(self, error: SetupError) -> None:
        """The handler's setup() raised: why, for the master's report (slot/setup_notes.py)."""
        ...
    def handled(self) -> None:
        """handle() returned normally: the jobs it left unresolved are DONE."""
        ...
    def running_marker(self) -> memoryview | None:
        """Where handle_job's loop stores the running job's id, or None."""
        ...
    def resolved(self, job: SlotJob) -> None:
        """A job's outcome as soon as it is decided: honoured by the master if the slot dies."""
        ...
    def given_back(self, jobs: Sequence[SlotJob]) -> None:
        """A retarget gave back these jobs, in order (slot/retarget.py); handle_job's loop ends."""
        ...


class SourceUnavailable(Exception):
    """Raised by a JobSource when the queue server cannot be reached or lost the connection."""


@dataclass(slots=True)
class SlotStats:
    """Counters since the fork; the beacon thread reads them while the loop writes them."""

    phase: SlotPhase = SlotPhase.STARTING
    queue: str | None = None
    jobs_done: int = 0
    jobs_later: int = 0
    jobs_failed: int = 0
    jobs_dead: int = 0
    batches: int = 0
    errors: int = 0
    busy_s: float = 0.0
    batch_started_at: float | None = None
    memory: MemoryUsage = NOT_MEASURED


# Runs before the handler with the queue and the batch; returns the jobs to hand to the
# handler (the others must be resolved by the hook, e.g. postponed with LATER).
BeforeBatch = Callable[[str, Sequence[SlotJob]], Sequence[SlotJob]]


class SlotLoop:
    def __init__(
        self,
        *,
        assignment: Assignment,
        handlers: Mapping[str, type[Handler]],
        source: JobSource,
        clock: Callable[[], float],
        read_memory: Callable[[], MemoryUsage],
        memory_watch: MemoryWatch | None = None,
        take_assignments: Callable[[], Sequence[Assignment]] = lambda: (),
        moving: Callable[[], bool] = lambda: False,
        before_batch: Sequence[BeforeBatch] = (),
        leases: LeaseNotes | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.assignment = assignment
        self.handlers = handlers
        self.source = source
        self.clock = clock
        self.read_memory = read_memory
        self.memory_watch = memory_watch or MemoryWatch()
        self.take_assignments = take_assignments
        # True while a retarget waits: handle_job's loop gives back the jobs it has not
        # started (slot/retarget.py).
        self.moving = moving
        self.before_batch = list(before_batch)
        self.leases = leases
        self.rng = rng or random.Random()
        self.stats = SlotStats(queue=assignment.queue)
        self.stop_requested = False
        self._handler: Handler | None = None
        # The handler class's own retry policy, when it overrides the queue's.
        self._policy: RetryPolicy | None = None
        self._failures_in_a_row = 0
        self._loop_noted = False
        # Private_Dirty that setup() alone left over the limit (0: under it); see _note_setup_memory.
        self._setup_dirty_bytes = 0
        # Its start, the jobs it took and its place in the jitters: recycling after jobs or an
        # age (slot/recycling.py).
        self.started_at = clock()
        self.jobs_taken = 0
        self.jitter = JitterDraw.draw(self.rng)

    def request_stop(self) -> None:
        """Finish the batch in progress (if any), then exit."""
        self.stop_requested = True
        self.stats.phase = SlotPhase.DRAINING

    def step(self, now: float) -> StepResult:
        self._apply_assignments()
        if self.stop_requested:
            return StepResult(StepKind.EXIT, exit_code=SlotExit.STOPPED)
        if self.over_memory_limit(self.stats.memory):
            # Measured by the beacon thread while this slot waited for jobs.
            return StepResult(StepKind.EXIT, exit_code=SlotExit.MEMORY_LIMIT)
        if (recycle := self._recycle(now)) is not None:
            # Aged while it waited for jobs: the beacon thread woke it (slot/process.py).
            return StepResult(StepKind.EXIT, exit_code=recycle)
        if self._handler is None:
            failed = self._start_handler()
            if failed is not None:
                return StepResult(StepKind.EXIT, exit_code=failed)
            self._note_setup_memory()
        handler = self._handler
        assert handler is not None
        if not self._loop_noted and self.leases is not None:
            self.leases.started()
            self._loop_noted = True
        self.stats.phase = SlotPhase.IDLE
        queue = self.assignment.queue
        try:
            jobs = self.source.fetch(queue, count=self._batch_count(), lock_s=self.assignment.lock_timeout_s)
        except SourceUnavailable as exc:
            return self._retry(f"cannot fetch from {queue}: {exc}")
        if jobs is None:
            return StepResult(StepKind.WOKEN)
        self._failures_in_a_row = 0
        self.jobs_taken += len(jobs)
        self._run_batch(handler, [SlotJob.from_job(job) for job in jobs])
        if self._over_memory_limit(now):
            return StepResult(StepKind.EXIT, jobs=len(jobs), exit_code=SlotExit.MEMORY_LIMIT)
        if (recycle := self._recycle(self.clock())) is not None:
            return StepResult(StepKind.EXIT, jobs=len(jobs), exit_code=recycle)
        return StepResult(StepKind.BATCH, jobs=len(jobs))

    def close(self) -> None:
        """Tear the handler down; the slot is about to exit."""
        self._stop_handler()
        self.stats.phase = SlotPhase.EXITING

    # The batch

    def _run_batch(self, handler: Handler, jobs: list[SlotJob]) -> None:
        started = self.clock()
        self.stats.batch_started_at = started
        self.stats.phase = SlotPhase.BUSY
        in_order = type(handler).handle is Handler.handle
        if self.leases is not None:
            # Before anything can go wrong (hooks, the handler, an os._exit in it).
            self.leases.hold(jobs, lock_s=self.assignment.lock_timeout_s, in_order=in_order)
            set_outcome_hook(self.leases.resolved)
        giving_back: GivingBack | None = None
        try:
            runnable: Sequence[SlotJob] = jobs
            for hook in self.before_batch:  # e.g. rate-limit permits; may postpone jobs
                runnable = hook(self.assignment.queue, runnable)
            if in_order:
                runnable = giving_back = GivingBack(
                    runnable, batch=jobs, moving=self.moving,
                    noted=None if self.leases is None else self.leases.given_back)
            if runnable:
                handler.handle(runnable)
            if self.leases is not None:
                self.leases.handled()
        except Exception as exc:  # the loop boundary: any handler bug is survived
            self.stats.errors += 1
            failed = fail_unresolved(jobs, exc)
            log.warning(
                "handler of %s raised on a batch of %d jobs; %d unresolved jobs fail with the "
                "traceback and come back after their backoff (%d resolved jobs keep their outcome)",
                self.assignment.queue, len(jobs), failed, len(jobs) - failed, exc_info=True,
            )
        if giving_back is not None and giving_back.given_back:
            log.info("retarget or stop during a batch of %s: %d of its %d jobs not started, given "
                     "back to the head of the queue (LATER ... FRONT, no attempt charged)",
                     self.assignment.queue, giving_back.given_back, len(jobs))
        try:
            self._acknowledge(handler, jobs)
        finally:
            set_outcome_hook(None)
            if self.leases is not None:
                self.leases.release()
            self.stats.busy_s += self.clock() - started
            self.stats.batch_started_at = None
            self.stats.batches += 1
            self.stats.phase = SlotPhase.DRAINING if self.stop_requested else SlotPhase.IDLE

    def _acknowledge(self, handler: Handler, jobs: list[SlotJob]) -> None:
        """Replies first (a crash after them repeats a reply, never loses one), then one
        multi-id DONE, one LATER ... FRONT for the jobs a retarget gave back, one LATER per
        delay, and the FAILs pipelined."""
        ack = acknowledgement(jobs, policy=self._policy, rng=self.rng)
        try:
            if ack.replies:
                self.source.reply(handler.output_queue(), ack.replies, ttl_s=handler.reply_ttl_s)
            if ack.done:
                self.source.done(ack.done)
                self.stats.jobs_done += len(ack.done)
            for job_id, result in ack.results:
                self.source.done_with_result(job_id, result, max_bytes=self.assignment.max_result_bytes)
                self.stats.jobs_done += 1
            if ack.front:
                self.source.later(ack.front, delay_s=None, front=True)
                self.stats.jobs_later += len(ack.front)
            for delay_s, ids in ack.later.items():
                self.source.later(ids, delay_s=delay_s)
                self.stats.jobs_later += len(ids)
            if ack.failures:
                self.stats.jobs_dead += self.source.fail(ack.failures)
                self.stats.jobs_failed += len(ack.failures)
        except SourceUnavailable as exc:
            self.stats.errors += 1
            log.warning(
                "could not acknowledge %d jobs of %s (%s); those not acknowledged come back "
                "when their lock expires (%s s), counted as a failed attempt",
                len(jobs), self.assignment.queue, exc, self.assignment.lock_timeout_s,
            )

    # Handler life and retargets

    def _start_handler(self) -> SlotExit | None:
        queue = self.assignment.queue
        cls = self.handlers.get(queue)
        if cls is None:
            log.error("no handler registered for queue %s; exiting", queue)
            return SlotExit.NO_HANDLER
        try:
            handler = cls()
            handler.setup()
        except Exception as exc:  # user code at the slot's boundary
            log.exception(
                "%s.setup() failed for queue %s; exiting, the master restarts with backoff",
                cls.__qualname__, queue,
            )
            if self.leases is not None:  # the master's report carries it (slot/setup_notes.py)
                self.leases.setup_failed(describe_setup_error(exc, handler=f"{cls.__module__}.{cls.__qualname__}"))
            return SlotExit.SETUP_FAILED
        self._handler = handler
        if self.leases is not None:
            handler._running = self.leases.running_marker()
        self._policy = handler_policy(cls, self.assignment.retry_policy())
        self.stats.queue = queue
        return None

    def _stop_handler(self) -> None:
        handler, self._handler = self._handler, None
        if handler is None:
            return
        try:
            handler.teardown()
        except Exception:  # teardown must not keep the slot from going on
            log.exception("%s.teardown() failed; continuing", type(handler).__qualname__)

    def _apply_assignments(self) -> None:
        for assignment in self.take_assignments():
            if assignment.queue != self.assignment.queue:
                log.info("retarget: %s -> %s", self.assignment.queue, assignment.queue)
                self._stop_handler()
                self.stats.queue = assignment.queue
            self.assignment = assignment
            if self._handler is not None:  # same queue, maybe a new retry policy
                self._policy = handler_policy(type(self._handler), assignment.retry_policy())

    # Memory and retries

    def over_memory_limit(self, usage: MemoryUsage) -> bool:
        return usage.private_dirty_bytes > self.assignment.private_dirty_limit_bytes + self._setup_dirty_bytes

    def _note_setup_memory(self) -> None:
        """A fresh fork gives back only what the slot wrote after its setup(): one whose setup()
        alone passes the limit (a 300 MB model against the default 256 MiB) was recycled before
        its first job, about twice a second for ever, and served no job. Such a slot is recycled
        when it grows past its setup's level by the limit instead, and says so."""
        self._setup_dirty_bytes = 0
        usage = self.stats.memory = self.read_memory()
        limit_bytes = self.assignment.private_dirty_limit_bytes
        if usage.private_dirty_bytes > limit_bytes:
            self._setup_dirty_bytes = usage.private_dirty_bytes
            log.warning(
                "setup() of %s left this slot at %d B Private_Dirty, over private_dirty_limit_bytes "
                "%d B: a fresh fork would load the same, so it is recycled only past %d B (its setup "
                "plus the limit); raise the limit, or load the data at import in the master, where "
                "its slots share it", self.assignment.queue, usage.private_dirty_bytes, limit_bytes,
                usage.private_dirty_bytes + limit_bytes)

    def _over_memory_limit(self, now: float) -> bool:
        """After a batch: read memory when the watch says so (the beacon thread also reads
        on its own clock), then compare the latest reading with the limit."""
        if self.memory_watch.due(jobs_done=self.stats.jobs_done, now=now):
            self.memory_watch.mark(jobs_done=self.stats.jobs_done, now=now)
            self.stats.memory = self.read_memory()
        usage = self.stats.memory
        if not self.over_memory_limit(usage):
            return False
        log.info(
            "Private_Dirty %d B over the limit %d B: exiting after the batch to be forked afresh",
            usage.private_dirty_bytes, self.assignment.private_dirty_limit_bytes,
        )
        return True

    # Recycling after jobs or an age

    def recycling(self, now: float) -> Recycle | None:
        """Why the slot is due to leave between batches, if it is (also asked by the beacon
        thread, to wake a slot that aged while it waits for jobs)."""
        return recycle_due(self.assignment, self.jitter, jobs_taken=self.jobs_taken,
                           batches=self.stats.batches, age_s=now - self.started_at)

    def _recycle(self, now: float) -> SlotExit | None:
        due = self.recycling(now)
        if due is None:
            return None
        log.info("%s: leaving between batches (the last one acknowledged), to be forked afresh", due.why)
        return due.exit_code

    def _batch_count(self) -> int:
        """The batch size, cut to the jobs left before max_jobs_per_slot: the slot runs its
        limit exactly, not up to a batch more."""
        left = jobs_left(self.assignment, self.jitter, jobs_taken=self.jobs_taken)
        return self.assignment.batch_size if left is None else max(1, min(self.assignment.batch_size, left))

    def _retry(self, why: str) -> StepResult:
        self._failures_in_a_row += 1
        delay_s = min(RETRY_MAX_S, RETRY_MIN_S * 2 ** (self._failures_in_a_row - 1))
        log.warning("%s; retrying in %.1f s", why, delay_s)
        return StepResult(StepKind.RETRY, retry_after_s=delay_s)
