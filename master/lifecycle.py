"""The life of one slot as seen by its master: states, allowed moves, events -> actions (pure).

The slot's lease (the batch it holds) rides along: noted before its handler runs, renewed
while it lives (master/leases.py), with the outcomes its handler decided meanwhile
(slot/outcome_notes.py), and settled at once when it dies (SettleJobs, master/settle.py)."""
from __future__ import annotations

import signal
from dataclasses import dataclass, field
from enum import StrEnum, auto

from slot.beacon import Assignment, Beacon
from slot.exit_codes import SlotExit, describe_exit


class SlotState(StrEnum):
    # Forked; no beacon yet.
    STARTING = auto()
    RUNNING = auto()
    # SIGTERM sent: finishing its batch until the stop deadline.
    DRAINING = auto()
    # SIGKILL sent (hung, over memory, or past the stop deadline): waiting to reap it.
    STOPPING = auto()
    # Reaped after a clean exit (asked to stop, or recycled for memory, jobs or age).
    EXITED = auto()
    # Reaped after anything else: a crash, a boot failure, a kill.
    FAILED = auto()


ALLOWED: dict[SlotState, frozenset[SlotState]] = {
    SlotState.STARTING: frozenset(
        {SlotState.RUNNING, SlotState.DRAINING, SlotState.STOPPING, SlotState.EXITED, SlotState.FAILED}
    ),
    SlotState.RUNNING: frozenset(
        {SlotState.DRAINING, SlotState.STOPPING, SlotState.EXITED, SlotState.FAILED}
    ),
    SlotState.DRAINING: frozenset({SlotState.STOPPING, SlotState.EXITED, SlotState.FAILED}),
    SlotState.STOPPING: frozenset({SlotState.EXITED, SlotState.FAILED}),
    SlotState.EXITED: frozenset(),
    SlotState.FAILED: frozenset(),
}
ALIVE = frozenset({SlotState.STARTING, SlotState.RUNNING, SlotState.DRAINING, SlotState.STOPPING})
# Slots that keep their queue and count toward the slot map (not on their way out).
SERVING = frozenset({SlotState.STARTING, SlotState.RUNNING})


class TransitionError(Exception):
    def __init__(self, slot_id: int, current: SlotState, wanted: SlotState) -> None:
        super().__init__(f"slot {slot_id}: cannot move from {current} to {wanted}")


class Counter(StrEnum):
    RECYCLED_FOR_MEMORY = auto()
    # max_jobs_per_slot, max_slot_age_s: sent in the report's own fields (master/report.py).
    RECYCLED_FOR_JOBS = auto()
    RECYCLED_FOR_AGE = auto()
    KILLED_HUNG = auto()
    KILLED_OVER_MEMORY = auto()
    CRASHED = auto()
    BOOT_FAILED = auto()
    # Jobs a slot held when it died that the master charged with the death (FAIL SOLO).
    JOBS_OF_DEAD_SLOTS_FAILED = auto()
    # ... whose outcome the handler had decided (honoured), and given back uncharged.
    JOBS_OF_DEAD_SLOTS_HONOURED = auto()
    JOBS_OF_DEAD_SLOTS_GIVEN_BACK = auto()


class KillCause(StrEnum):
    """Why the master SIGKILLed a slot (its crash cause in events and /metrics)."""

    HUNG = auto()
    OVER_MEMORY = auto()
    STOP_DEADLINE = auto()
    # Its job was cancelled: an operator's choice, not a crash (no crash event, no backoff).
    CANCELLED = auto()


@dataclass(frozen=True, slots=True)
class Lease:
    """The batch a slot holds, from its last LeaseNote: renewed while it lives, failed if it dies."""

    # (lease id, attempt) per job
    jobs: tuple[tuple[int, int | None], ...]
    lock_s: float
    # When the master last learned of it or renewed it (monotonic).
    renewed_at: float
    # Each job's key in the order of `jobs` (may be shorter: older slots send none).
    keys: tuple[str | None, ...] = ()
    # Run one by one in this order (handle_job): a death names the first job left undecided.
    in_order: bool = False


@dataclass(slots=True)
class Slot:
    """The master's record of one slot process. Only on_event changes `state`."""

    slot_id: int
    pid: int
    assignment: Assignment
    started_at: float
    state: SlotState = SlotState.STARTING
    last_beacon_at: float = 0.0
    beacon: Beacon | None = None
    stop_deadline: float | None = None
    retarget_sent_at: float | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    lease: Lease | None = None
    # Why the master killed it (hung, over memory...), for the error of its failed jobs.
    kill_reason: str | None = None
    kill_cause: KillCause | None = None
    # It reached its job loop (its first fetch): a death from then on is no failed start.
    loop_started: bool = False
    # The outcome notes of its current batch (raw lines, parsed only if it dies holding it).
    outcomes: list[bytes] = field(default_factory=list)
    # The code generation it was forked from (master/generations.py): a reload replaces
    # the slots of older ones.
    generation: int = 0
    # Lease ids of its batch cancelled on the queue server: dead there already, so they are
    # left out when its batch is settled (their DONE or LATER would be refused).
    cancelled: frozenset[int] = frozenset()
    # A silent slot's CPU time (clock ticks) when the master last looked, and when that look
    # found it grown: busy in code that holds the GIL, not hung (master/silence.py).
    cpu_ticks: int | None = None
    busy_seen_at: float = 0.0
    jobs_taken: int = 0  # from its lease notes: the figure of a recycle after max_jobs_per_slot

    def __post_init__(self) -> None:
        # A fresh slot has until its first beacon is due (plus grace) before it counts as hung.
        self.last_beacon_at = self.last_beacon_at or self.started_at

    @property
    def queue(self) -> str:
        """The queue the slot reports working on (its assignment until it beacons)."""
        if self.beacon is not None and self.beacon.queue is not None:
            return self.beacon.queue
        return self.assignment.queue


# Events
@dataclass(frozen=True, slots=True)
class Beaconed:
    beacon: Beacon


@dataclass(frozen=True, slots=True)
class StopRequested:
    deadline_s: float


@dataclass(frozen=True, slots=True)
class DeadlinePassed:
    pass


@dataclass(frozen=True, slots=True)
class Hung:
    reason: str
    # Judged by its beacons' silence only: master/silence.py asks the kernel before a kill.
    silent: bool = False


@dataclass(frozen=True, slots=True)
class OverMemory:
    private_dirty_bytes: int
    limit_bytes: int


@dataclass(frozen=True, slots=True)
class Exited:
    code: int | None
    signal: int | None


@dataclass(frozen=True, slots=True)
class Leased:
    """A LeaseNote: the slot now holds these jobs (none: its batch is acknowledged)."""

    jobs: tuple[tuple[int, int | None], ...]
    lock_s: float
    keys: tuple[str | None, ...] = ()
    in_order: bool = False


@dataclass(frozen=True, slots=True)
class JobCancelled:
    """A job of the slot's batch was cancelled (CANCEL, read with CANCELLED): kill the slot."""

    lease_id: int
    key: str
    door: str


@dataclass(frozen=True, slots=True)
class LoopStarted:
    """The slot's start note: it reached its job loop."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """An outcome note of the slot's current batch (one raw line)."""

    line: bytes


SlotEvent = (Beaconed | StopRequested | DeadlinePassed | Hung | OverMemory | Exited | Leased
             | LoopStarted | Resolved | JobCancelled)


# Actions for the I/O shell
@dataclass(frozen=True, slots=True)
class SendSignal:
    pid: int
    signal: int


@dataclass(frozen=True, slots=True)
class Count:
    counter: Counter


@dataclass(frozen=True, slots=True)
class Log:
    warning: bool
    message: str


@dataclass(frozen=True, slots=True)
class SettleJobs:
    """Settle the batch a dead slot held, at once (master/settle.py): its decided outcomes
    honoured, the rest charged or given back."""

    queue: str
    slot_id: int
    lease: Lease
    # Its outcome notes (the DONE bits are read from the slot's shared page: master/leases.py).
    outcomes: tuple[bytes, ...]
    reason: str
    # False when nobody is to blame (killed for a missed stop deadline).
    blame: bool
    # The death names the first job left undecided: its jobs ran in order (handle_job) and it
    # died of itself or hung (not of memory, which a batch may have built up job by job).
    ordered: bool = False
    # Lease ids cancelled on the queue server (dead there): no request for them.
    gone: frozenset[int] = frozenset()


Action = SendSignal | Count | Log | SettleJobs


@dataclass(frozen=True, slots=True)
class Limits:
    beacon_interval_s: float
    hung_after_beacons: int
    hard_memory_limit_bytes: int
    # Extra time before the first beacon (fork, handler setup in the slot's first step).
    startup_grace_s: float = 5.0


def on_event(slot: Slot, event: SlotEvent, now: float) -> list[Action]:
    """Apply `event` to `slot` (changing its state) and say what the shell must do."""
    match event:
        case Beaconed(beacon):
            slot.beacon = beacon
            slot.last_beacon_at = now
            if slot.state is SlotState.STARTING:
                _move(slot, SlotState.RUNNING)
            return []
        case StopRequested(deadline_s):
            if slot.state in (SlotState.DRAINING, SlotState.STOPPING):
                return []
            _move(slot, SlotState.DRAINING)
            slot.stop_deadline = now + deadline_s
            return [SendSignal(slot.pid, signal.SIGTERM)]
        case DeadlinePassed():
            _move(slot, SlotState.STOPPING)
            slot.kill_reason = "it missed its stop deadline"
            slot.kill_cause = KillCause.STOP_DEADLINE
            return [
                SendSignal(slot.pid, signal.SIGKILL),
                Log(True, f"slot {slot.slot_id} (pid {slot.pid}) missed its stop deadline: SIGKILL"),
            ]
        case Hung(reason, _):
            return _kill(slot, Counter.KILLED_HUNG, KillCause.HUNG, f"hung ({reason})")
        case OverMemory(used, limit):
            return _kill(slot, Counter.KILLED_OVER_MEMORY, KillCause.OVER_MEMORY,
                         f"Private_Dirty {used} B over the hard limit {limit} B")
        case Exited(code, sig):
            return _exited(slot, code, sig, now) + _settle_held_jobs(slot, code, sig)
        case Leased(jobs, lock_s, keys, in_order):
            slot.lease = Lease(jobs, lock_s, now, keys, in_order) if jobs else None
            slot.jobs_taken += len(jobs)
            slot.outcomes = []
            return []
        case LoopStarted():
            slot.loop_started = True
            return []
        case JobCancelled(lease_id, key, door):
            # SIGKILL, not SIGTERM: a SIGTERMed slot finishes the job it runs, and the job is
            # the one to stop. The rest of its batch is settled as a stop-deadline kill's:
            # nobody is blamed, nothing is charged (master/settle.py).
            slot.cancelled |= {lease_id}
            # Not counted: a report's counters are a closed set an older manager validates.
            return _kill(slot, None, KillCause.CANCELLED,
                         f"its job {key} was cancelled by {door}", warning=False)
        case Resolved(line):
            if slot.lease is not None:
                slot.outcomes.append(line)
            return []
    raise AssertionError(f"unknown event {event!r}")


def check(slot: Slot, now: float, limits: Limits) -> SlotEvent | None:
    """The event the clock or the last beacon implies for `slot`, if any."""
    deadline = slot.stop_deadline
    if slot.state is SlotState.DRAINING and deadline is not None and now >= deadline:
        return DeadlinePassed()
    if slot.state not in (SlotState.STARTING, SlotState.RUNNING, SlotState.DRAINING):
        return None
    allowed_s = limits.beacon_interval_s * limits.hung_after_beacons
    if slot.state is SlotState.STARTING:
        allowed_s += limits.startup_grace_s
    if now - max(slot.last_beacon_at, slot.busy_seen_at) > allowed_s:
        return Hung(f"no beacon for {now - slot.last_beacon_at:.2f} s", silent=True)
    beacon = slot.beacon
    if beacon is None:
        return None
    if beacon.private_dirty_bytes > limits.hard_memory_limit_bytes:
        return OverMemory(beacon.private_dirty_bytes, limits.hard_memory_limit_bytes)
    timeout_s = slot.assignment.batch_timeout_s
    # A batch keeps ageing while its slot is silent (busy in code that holds the GIL).
    age_s = beacon.batch_age_s + (now - slot.last_beacon_at if beacon.batch_age_s > 0 else 0.0)
    if timeout_s is not None and age_s > timeout_s:
        # Its lock is renewed while it lives, so only this limit ends a batch stuck in Python.
        return Hung(f"batch running {age_s:.1f} s, past its handler's "
                    f"batch_timeout_s {timeout_s:g} s")
    return None


def _kill(slot: Slot, counter: Counter | None, cause: KillCause, why: str, *,
          warning: bool = True) -> list[Action]:
    if slot.state is SlotState.STOPPING:
        return []
    _move(slot, SlotState.STOPPING)
    slot.kill_reason = why
    slot.kill_cause = cause
    counted: list[Action] = [] if counter is None else [Count(counter)]
    return [
        SendSignal(slot.pid, signal.SIGKILL),
        *counted,
        Log(warning, f"slot {slot.slot_id} (pid {slot.pid}, queue {slot.queue}) {why}: SIGKILL"),
    ]


def _exited(slot: Slot, code: int | None, sig: int | None, now: float) -> list[Action]:
    slot.exit_code, slot.exit_signal = code, sig
    killed_by_us = slot.state is SlotState.STOPPING
    clean = sig is None and code in CLEAN_EXITS
    _move(slot, SlotState.EXITED if clean else SlotState.FAILED)
    what = f"slot {slot.slot_id} (pid {slot.pid}, queue {slot.queue}) {describe_exit(code, sig)}"
    if code == SlotExit.MEMORY_LIMIT and sig is None:
        return [Count(Counter.RECYCLED_FOR_MEMORY), Log(False, f"{what}: recycled for memory")]
    if code == SlotExit.MAX_JOBS and sig is None:
        return [Count(Counter.RECYCLED_FOR_JOBS), Log(False, f"{what}: recycled: {slot.jobs_taken} jobs")]
    if code == SlotExit.MAX_AGE and sig is None:
        age_s = now - slot.started_at  # tenths below 10 s (a test's ages), whole seconds above
        return [Count(Counter.RECYCLED_FOR_AGE), Log(False, f"{what}: recycled: age {age_s:.{int(age_s < 10)}f} s")]
    if clean or killed_by_us:
        return [Log(False, what)]
    if sig is None and code is not None and code in _BOOT_FAILURES:
        return [Count(Counter.BOOT_FAILED), Log(True, f"{what}: could not start working")]
    return [Count(Counter.CRASHED), Log(True, f"{what}: died unexpectedly")]


def _settle_held_jobs(slot: Slot, code: int | None, sig: int | None) -> list[Action]:
    lease, slot.lease = slot.lease, None
    outcomes, slot.outcomes = slot.outcomes, []
    if lease is None:
        return []
    reason = f"slot {slot.slot_id} (pid {slot.pid}) {describe_exit(code, sig)}"
    if slot.kill_reason is not None:
        reason += f": the master killed it, {slot.kill_reason}"
    blame = slot.kill_cause not in (KillCause.STOP_DEADLINE, KillCause.CANCELLED)
    # A cancel's order still says which jobs finished (before the running one) and which
    # never started (after it): settle.py gives the latter back at the head of the queue.
    ordered = lease.in_order and (slot.kill_cause is KillCause.CANCELLED
                                  or (blame and slot.kill_cause is not KillCause.OVER_MEMORY))
    return [SettleJobs(slot.queue, slot.slot_id, lease, tuple(outcomes), reason, blame, ordered,
                       slot.cancelled)]


_BOOT_FAILURES = frozenset(code.value for code in SlotExit if code.is_boot_failure)
CLEAN_EXITS = frozenset({SlotExit.STOPPED.value} | {code.value for code in SlotExit if code.is_recycle})


def _move(slot: Slot, wanted: SlotState) -> None:
    if wanted not in ALLOWED[slot.state]:
        raise TransitionError(slot.slot_id, slot.state, wanted)
    slot.state = wanted
