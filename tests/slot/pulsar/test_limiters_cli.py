"""`slotmap limiters` prints each limiter's rate in force, permits granted and cuts."""
from __future__ import annotations

from slot.pulsar.limiters_cli import render
from slot.pulsar.protocol import LimiterView


def test_the_table_shows_the_rate_in_force_next_to_the_configured_one() -> None:
    view = LimiterView(configured_per_s=10.0, current_per_s=5.0, capacity=1.0, tokens=0.0,
                       paused_for_s=0.0, granted_total=1234, cuts=2, pauses=1)
    text = render({"emails": view})
    header, line = text.splitlines()
    assert header.split()[:2] == ["limiter", "rate"]
    assert line.split() == ["emails", "5/s", "10/s", "1234", "2", "1", "0", "0", "-"]


def test_no_limiter_says_so() -> None:
    assert render({}) == "no rate limiters (no queue has a rate_limit)"
