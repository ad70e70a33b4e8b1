"""Named exit codes of a slot process: the master reads them to decide how to restart."""
from __future__ import annotations

from enum import IntEnum


class SlotExit(IntEnum):
    # Asked to stop (SIGTERM or SIGINT) and finished its batch.
    STOPPED = 0
    # An unexpected exception outside any handler call: a bug in the slot itself.
    CRASHED = 1
    # Private_Dirty passed the queue's limit: the batch was acknowledged, a fresh fork follows.
    MEMORY_LIMIT = 3
    # The handler's setup() raised: restarting at once would only fail again, so back off.
    SETUP_FAILED = 4
    # No handler is registered for the assigned queue (its module may have failed to import).
    NO_HANDLER = 5
    # max_jobs_per_slot (plus its jitter) reached, max_slot_age_s (plus its jitter) passed: the
    # batch was acknowledged, a fresh fork follows. Not 7: test handlers and the guide's
    # crash example exit with 7, and a crash must never read as a recycle.
    MAX_JOBS = 6
    MAX_AGE = 8

    @property
    def is_recycle(self) -> bool:
        """True when the slot left on its own to be forked afresh (memory, jobs or age)."""
        return self in (SlotExit.MEMORY_LIMIT, SlotExit.MAX_JOBS, SlotExit.MAX_AGE)

    @property
    def is_boot_failure(self) -> bool:
        """True when the slot could not start working; the master restarts it with backoff."""
        return self in (SlotExit.SETUP_FAILED, SlotExit.NO_HANDLER)


def describe_exit(code: int | None, signal_number: int | None) -> str:
    """One human phrase for a reaped slot: 'exit 3 (memory_limit)' or 'killed by SIGKILL'."""
    import signal as _signal

    if signal_number is not None:
        try:
            name = _signal.Signals(signal_number).name
        except ValueError:
            name = f"signal {signal_number}"
        return f"killed by {name}"
    if code is None:
        return "exited"
    try:
        return f"exit {code} ({SlotExit(code).name.lower()})"
    except ValueError:
        return f"exit {code}"
