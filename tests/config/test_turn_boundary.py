"""config/periodic.py: the boundary every periodic task's turn runs in."""
from __future__ import annotations

import logging

import pytest

from config.periodic import TurnBoundary

log = logging.getLogger("test.turns")


def boundary(clock: list[float]) -> TurnBoundary:
    return TurnBoundary("the chore", next_turn="tried again in 1 s", log=log, remind_s=60.0,
                        clock=lambda: clock[0])


def fail(turns: TurnBoundary, message: str) -> None:
    with turns:
        raise OSError(message)


def test_a_failing_turn_is_logged_with_its_traceback_and_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    clock = [100.0]
    turns = boundary(clock)
    fail(turns, "disk full")
    [record] = caplog.records
    assert record.getMessage() == "the chore failed (OSError: disk full); tried again in 1 s"
    assert record.exc_info is not None and "disk full" in str(record.exc_info[1])


def test_failures_that_go_on_are_counted_once_per_reminder_then_the_recovery_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    clock = [100.0]
    turns = boundary(clock)
    for second in range(121):  # one failing turn a second for two minutes
        clock[0] = 100.0 + second
        fail(turns, f"turn {second}")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "the chore failed (OSError: turn 0); tried again in 1 s",
        "the chore still failing: 61 times in a row over 60 s, the latest: OSError: turn 60; tried again in 1 s",
        "the chore still failing: 121 times in a row over 120 s, the latest: OSError: turn 120; tried again in 1 s",
    ]
    assert "turn 120" in str(caplog.records[-1].exc_info[1])  # type: ignore[index]
    with turns:
        pass
    assert caplog.records[-1].getMessage() == "the chore works again after 121 failed turns"
    caplog.clear()
    fail(turns, "again")  # a new outage starts with a traceback at once
    assert [r.getMessage() for r in caplog.records] == ["the chore failed (OSError: again); tried again in 1 s"]


def test_a_stop_on_purpose_passes_through(caplog: pytest.LogCaptureFixture) -> None:
    turns = boundary([0.0])
    with pytest.raises(KeyboardInterrupt), turns:
        raise KeyboardInterrupt
    assert caplog.records == [] and turns.failures == 0


def test_an_expected_outage_is_logged_with_its_reason_and_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    turns = TurnBoundary("reading the states", next_turn="shown as unknown", log=log, traceback=False)
    fail(turns, "connection refused")
    [record] = caplog.records
    assert record.getMessage() == "reading the states failed (OSError: connection refused); shown as unknown"
    assert not record.exc_info
