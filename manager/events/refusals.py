"""Frames refused at the manager's master door, counted by reason and logged at a bounded rate (pure, clock passed in).

A hostile or broken peer can send a bad frame every millisecond; one log line each
would flood the log (and the disk) as surely as the frames flood the socket. Each reason
is logged at most once per `every_s`, with how many were refused since the last line, and
every refusal is counted for good (`totals`). The lines logged are also kept as notes for
the manager to record as events, so the dashboard shows that its door is being knocked on.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

# At most one line (and one event) per reason this often.
LOG_EVERY_S = 10.0
# A peer's words quoted in a log line (a pydantic error quotes the bad value) are cut here.
MAX_DETAIL_CHARS = 300


@dataclass(frozen=True, slots=True)
class RefusalNote:
    reason: str
    count: int
    total: int
    message: str


@dataclass(slots=True)
class Refusals:
    every_s: float = LOG_EVERY_S
    totals: Counter[str] = field(default_factory=Counter)
    _unlogged: Counter[str] = field(default_factory=Counter)
    _logged_at: dict[str, float] = field(default_factory=dict)
    _notes: list[RefusalNote] = field(default_factory=list)

    def refused(self, reason: str, detail: str, now: float) -> None:
        """One frame refused for `reason` (a short fixed phrase); `detail` says which and why."""
        self.totals[reason] += 1
        self._unlogged[reason] += 1
        if now - self._logged_at.get(reason, float("-inf")) < self.every_s:
            return
        self._logged_at[reason] = now
        count, self._unlogged[reason] = self._unlogged[reason], 0
        cut = detail if len(detail) <= MAX_DETAIL_CHARS else detail[:MAX_DETAIL_CHARS] + "..."
        message = (f"refused {count} frame{'s' if count != 1 else ''} on the master link "
                   f"({reason}; {self.totals[reason]} since start; at most one line per "
                   f"{self.every_s:.0f} s)")
        log.warning("%s; the last: %s", message, cut)
        self._notes.append(RefusalNote(reason, count, self.totals[reason], message))

    def take_notes(self) -> list[RefusalNote]:
        notes, self._notes = self._notes, []
        return notes
