"""Refused frames: every one counted, one log line per reason per interval (manager/events/refusals.py)."""
from __future__ import annotations

import logging

import pytest

from manager.events.refusals import MAX_DETAIL_CHARS, Refusals


def test_a_flood_is_counted_whole_and_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    refusals = Refusals(every_s=10.0)
    with caplog.at_level(logging.WARNING, logger="manager.events.refusals"):
        for i in range(1000):
            refusals.refused("bad frame", f"frame {i}", now=i / 100)  # 10 s of frames
        refusals.refused("bad frame", "the last", now=10.5)
        refusals.refused("spoof", "another reason", now=10.6)
    assert refusals.totals == {"bad frame": 1001, "spoof": 1}
    assert len(caplog.records) == 3
    assert "refused 1 frame on" in caplog.records[0].getMessage()
    assert "refused 1000 frames on" in caplog.records[1].getMessage()
    assert "1001 since start" in caplog.records[1].getMessage()
    notes = refusals.take_notes()
    assert [(n.reason, n.count, n.total) for n in notes] == [
        ("bad frame", 1, 1), ("bad frame", 1000, 1001), ("spoof", 1, 1)]
    assert refusals.take_notes() == []


def test_a_peers_words_in_the_log_are_cut(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="manager.events.refusals"):
        Refusals().refused("bad frame", "x" * 10_000, now=0.0)
    assert len(caplog.records[0].getMessage()) < MAX_DETAIL_CHARS + 300
