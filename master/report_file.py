"""The master's report file (--report-file): its HostReport, replaced atomically every interval."""
from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from config.periodic import TurnBoundary

log = logging.getLogger(__name__)


class ReportFile:
    def __init__(self, path: Path | None, interval_s: float) -> None:
        self.path = path
        self.interval_s = interval_s
        self._written_at = float("-inf")
        self.turns = TurnBoundary(f"writing the report file {path}", log=log,
                                  next_turn=f"the slots go on; tried again in {interval_s:g} s")

    def maybe_write(self, now: float, report: Callable[[], bytes]) -> None:
        """Write `report()` if the interval has passed since the last write."""
        if self.path is None or now - self._written_at < self.interval_s:
            return
        self._written_at = now
        temporary = self.path.with_suffix(".tmp")
        # Its own boundary: a report that cannot be written (a full disk) must not keep the
        # rest of the tick (a managed master's heartbeats) from running.
        with self.turns:
            temporary.write_bytes(report())
            # Readers never see half a report.
            temporary.replace(self.path)
