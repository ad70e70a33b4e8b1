"""A client back at its turn a moment before its permit accrued keeps its place (pure limiter)."""
from __future__ import annotations

import pytest

from slot.pulsar.limiter import Limiter


def test_a_client_back_slightly_early_waits_only_for_its_permit_not_behind_the_queue() -> None:
    limiter = Limiter(10, 1.0)
    assert limiter.try_acquire(0.0).granted == 1
    first = limiter.try_acquire(0.0)           # A: next permit at 0.1
    second = limiter.try_acquire(0.001)        # B: behind A, at 0.2
    assert (first.granted, second.granted) == (0, 0)
    assert first.retry_after_s == pytest.approx(0.1)
    assert second.retry_after_s == pytest.approx(0.199)
    early = limiter.try_acquire(0.098, retry=True)   # A wakes 2 ms early
    assert early.granted == 0
    assert early.retry_after_s == pytest.approx(0.002)
    assert limiter.try_acquire(0.1, retry=True).granted == 1
    # B's turn is still 0.2: A's early try did not push it back.
    assert limiter.try_acquire(0.2, retry=True).granted == 1


def test_two_clients_taking_turns_get_the_whole_rate() -> None:
    limiter = Limiter(10, 1.0)
    now, granted = 0.0, 0
    wake = {"a": 0.0, "b": 0.0}
    retry = {"a": False, "b": False}
    while now < 10.0:
        client = min(wake, key=wake.__getitem__)
        now = wake[client]
        grant = limiter.try_acquire(now, retry=retry[client])
        granted += grant.granted
        # Each wake-up is 3 ms early or late in turn, as sleeps and networks are.
        jitter = 0.003 if granted % 2 else -0.003
        retry[client] = not grant.granted
        step = grant.retry_after_s + jitter if not grant.granted else 0.02
        wake[client] = now + max(step, 0.0005)
    assert granted >= 0.95 * 10 * 10.0
