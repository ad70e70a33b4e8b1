"""The exception boundary of a periodic task: a failing turn is logged, and the next turn runs.

Shared by every loop, timer and thread that works in turns (the master's tick and report,
a slot's beacons, the pulsar, the manager's turn, a replica's link to its primary). The
first failure is logged with its traceback and what happens next; while failures go on, one
line per `remind_s` counts them with the latest traceback (a tick 20 times a second must not
write 20 tracebacks a second, nor go quiet for good); the first turn that works says so.
"""
from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from types import TracebackType

REMIND_S = 60.0


class TurnBoundary:
    """`with boundary: one_turn()`: an Exception is logged and swallowed (the task goes on);
    KeyboardInterrupt, SystemExit and asyncio's CancelledError pass, since they stop the
    task on purpose."""

    def __init__(self, what: str, *, next_turn: str, log: logging.Logger, remind_s: float = REMIND_S,
                 traceback: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        # False for an expected outage (a server away), where the reason says it all.
        self.traceback = traceback
        self.next_turn = next_turn
        self.log = log
        self.remind_s = remind_s
        self.clock = clock
        self.failing_since: float | None = None
        self.reminded_at = 0.0
        self.failures = 0  # in a row; 0 once a turn works

    def __enter__(self) -> TurnBoundary:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        if kind is None:
            self.succeeded()
            return False
        if not issubclass(kind, Exception):
            return False
        self.failed()
        return True

    def failed(self) -> None:
        """Inside an `except` block: the exception being handled is the one logged."""
        now = self.clock()
        self.failures += 1
        error = sys.exc_info()[1]
        reason = "no exception" if error is None else f"{type(error).__name__}: {error}"
        if self.failing_since is None:
            self.failing_since = self.reminded_at = now
            self.log.error("%s failed (%s); %s", self.what, reason, self.next_turn,
                           exc_info=self.traceback)
        elif now - self.reminded_at >= self.remind_s:
            self.reminded_at = now
            self.log.error("%s still failing: %d times in a row over %.0f s, the latest: %s; %s",
                           self.what, self.failures, now - self.failing_since, reason, self.next_turn,
                           exc_info=self.traceback)

    def succeeded(self) -> None:
        if self.failing_since is not None:
            self.log.info("%s works again after %d failed turns", self.what, self.failures)
            self.failing_since = None
            self.failures = 0
