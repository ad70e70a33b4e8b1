"""What follows a slot's death, beside settling its batch: the crash on record (master/crashes.py)
and the pace of its queue's next forks (master/backoff.py). Also where the queue earns
crash forks by its work, and where a slot that reached its job loop clears its queue's
backoff (both from the slot's pipe notes)."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from master.backoff import BootBackoff, ForkBudget
from master.crashes import CrashLog, crash_cause
from master.lifecycle import KillCause, Leased, Slot, SlotEvent
from master.settle import Settlement
from master.start_failures import SetupFailed, StartFailure, StartFailures
from slot.exit_codes import SlotExit

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Deaths:
    backoff: BootBackoff = field(default_factory=BootBackoff)
    forks: ForkBudget = field(default_factory=ForkBudget)
    crashes: CrashLog = field(default_factory=CrashLog)
    starts: StartFailures = field(default_factory=StartFailures)

    def may_fork(self, queue: str, now: float) -> bool:
        return self.backoff.ready(queue, now) and self.forks.may_fork(queue, now)

    def before_note(self, slot: Slot, event: SlotEvent | SetupFailed, now: float) -> SlotEvent | None:
        """A pipe note of `slot`, before the slot's record takes it: the event for the record
        (None for a setup-error note, kept here for the report)."""
        queue = slot.assignment.queue
        if isinstance(event, SetupFailed):
            failure = self.starts.setup_failed(queue, event.error, time.time())
            if failure.count == 1:  # the same error again is only counted (the log has each traceback)
                log.warning("queue %s: setup() failed (%s); the hosts' reports carry it", queue, failure.error)
            return None
        if isinstance(event, Leased) and slot.lease is not None:
            # A batch its slot lived through: the queue earns crash forks by its work.
            self.forks.earn(queue, len(slot.lease.jobs), now)
        return event

    def after_note(self, slot: Slot) -> None:
        if slot.loop_started and self.starts.failing(slot.assignment.queue):
            self.starts.started(slot.assignment.queue)
        if slot.loop_started and self.backoff.failures(slot.assignment.queue):
            self.backoff.record_success(slot.assignment.queue)

    def start_failures(self, now: float) -> list[StartFailure]:
        """The report's: each with how long its queue's next fork still waits."""
        return self.starts.reported({queue: self.backoff.wait_s(queue, now) for queue in self.starts.queues()})

    def failed_fork(self, queue: str, now: float) -> None:
        self.backoff.record_failed_start(queue, now)

    def died(self, slot: Slot, code: int | None, sig: int | None, settled: Settlement | None,
             now: float) -> None:
        """`slot` was reaped (its record already says how it ended)."""
        cause = crash_cause(code, sig, slot.kill_cause)
        if cause is None:
            return
        queue = slot.assignment.queue
        self.crashes.add(
            at_unix=time.time(), queue=slot.queue, slot_id=slot.slot_id, pid=slot.pid,
            exit_code=code, signal=sig, cause=cause,
            key=settled.blamed_key if settled else None,
            honoured=settled.honoured if settled else 0,
            given_back=settled.given_back if settled else 0,
            charged=settled.charged if settled else 0,
        )
        if slot.kill_cause is KillCause.STOP_DEADLINE:
            return
        if code in (SlotExit.SETUP_FAILED, SlotExit.NO_HANDLER) or not slot.loop_started:
            delay_s = self.backoff.record_failed_start(queue, now)
            log.warning("queue %s: slot restarts wait %.1f s (%d failed starts in a row)",
                        queue, delay_s, self.backoff.failures(queue))
            return
        # Died in its job loop: replaced at once, within the queue's fork budget, which the
        # jobs it finished before dying add to.
        self.forks.earn(queue, settled.honoured if settled else 0, now)
        self.forks.crashed(queue)

