"""The one way tests wait: poll a condition with a deadline (never a bare sleep).

Imported by name (`from polling import poll_until`): pytest puts tests/ on sys.path for
tests/conftest.py.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# How long a test waits for what real processes do (start, reach a state, write a log line)
# when the time is not what the test is about. `make test` must pass on a shared 2-core
# machine with two busy loops beside it: there a process can go unscheduled for seconds, and
# 10 s deadlines failed ("not reached within 10.0 s"). A passing test never waits this long;
# only a failing one pays it.
DEADLINE_S = 30.0


def poll_until(predicate: Callable[[], T], timeout_s: float = DEADLINE_S, *,
               what: str | Callable[[], str] = "condition", interval_s: float = 0.02) -> T:
    """Call `predicate` until it returns something truthy and return that; AssertionError
    naming `what` (a text, or a function giving it at the deadline) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        asked_at = time.monotonic()
        value = predicate()
        if value:
            return value
        # Only an answer asked for at the deadline or later fails: a test held back past the
        # deadline between two asks gets one more.
        if asked_at >= deadline:
            text = what() if callable(what) else what
            raise AssertionError(f"{text}: not reached within {timeout_s} s (last: {value!r})")
        time.sleep(interval_s)
