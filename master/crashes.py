"""The master's record of its slots' crashes (pure): counts by queue and cause, and the latest
crashes with a sequence number, both in every report (the manager turns new ones into
`slot_crashed` events, the dashboard's /metrics counts them by queue and cause)."""
from __future__ import annotations

import signal as _signal
from collections import deque
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field

from config.bounded import Count, Name, Pid, QueueName, SlotNumber, UnixTime
from config.frames import Frame
from master.lifecycle import CLEAN_EXITS, KillCause
from slot.exit_codes import SlotExit

# Crashes a report repeats: the manager reads every report (one a second), so this only has to
# cover the crashes of one report interval; more in one interval are counted, not listed.
MAX_RECENT = 50


# A crash's cause as a label (crash_cause); bounded, as a peer sends it.
CrashCause = Annotated[str, Field(max_length=32, pattern=r"^[A-Za-z0-9_]+$")]
# Crashes by cause for one queue: exit codes, signals and the master's own causes, < 400.
CrashCounts = Annotated[dict[CrashCause, Count], Field(max_length=512)]


class SlotCrash(Frame):
    """One slot that died unasked (or was killed by its master), as reported to the manager.
    Every field bounded (config/bounded.py): the manager takes these from any peer."""

    seq: Count = Field(ge=1)
    at_unix: UnixTime
    queue: QueueName
    slot_id: SlotNumber
    pid: Pid
    exit_code: int | None = Field(default=None, ge=0, le=255)
    signal: int | None = Field(default=None, ge=1, le=128)
    # exit_<n>, SIG<NAME>, setup_failed, no_handler, hung, over_memory, stop_deadline
    cause: CrashCause
    # The job charged with it (the death named it), if any.
    key: Name | None = None
    # Jobs it held: outcomes honoured, given back uncharged, charged.
    honoured: Count = 0
    given_back: Count = 0
    charged: Count = 0


def crash_cause(code: int | None, sig: int | None, kill_cause: KillCause | None) -> str | None:
    """A crash's cause, as a label; None for a clean exit (asked to stop, recycled for memory,
    jobs or age)
    and for a slot killed because its job was cancelled."""
    if kill_cause is KillCause.CANCELLED:
        return None  # killed because its job was cancelled: an operator's choice, no crash
    if kill_cause is not None:
        return str(kill_cause)
    if sig is not None:
        try:
            return _signal.Signals(sig).name
        except ValueError:
            return f"signal_{sig}"
    if code is None or code in CLEAN_EXITS:
        return None
    if code == SlotExit.SETUP_FAILED:
        return "setup_failed"
    if code == SlotExit.NO_HANDLER:
        return "no_handler"
    return f"exit_{code}"


@dataclass(slots=True)
class CrashLog:
    seq: int = 0
    recent: deque[SlotCrash] = field(default_factory=lambda: deque(maxlen=MAX_RECENT))
    # queue -> cause -> crashes since the master started
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, *, at_unix: float, queue: str, slot_id: int, pid: int, exit_code: int | None,
            signal: int | None, cause: str, key: str | None = None, honoured: int = 0,
            given_back: int = 0, charged: int = 0) -> SlotCrash:
        self.seq += 1
        crash = SlotCrash(seq=self.seq, at_unix=at_unix, queue=queue, slot_id=slot_id, pid=pid,
                          exit_code=exit_code, signal=signal, cause=cause, key=key,
                          honoured=honoured, given_back=given_back, charged=charged)
        self.recent.append(crash)
        by_cause = self.counts.setdefault(queue, {})
        by_cause[cause] = by_cause.get(cause, 0) + 1
        return crash
