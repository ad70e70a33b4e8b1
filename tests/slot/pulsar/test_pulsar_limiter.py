"""The pure limiter over virtual time: smooth permits, turns for waiters, slow-down, pause, recovery."""
from __future__ import annotations

import heapq
import itertools
import math

import pytest

from slot.pulsar.limiter import Limiter, Tuning
from slot.pulsar.protocol import OK, SLOW_DOWN, pause


def run_clients(
    limiter: Limiter, *, clients: int, n: int = 1, start_s: float = 0.0, duration_s: float,
) -> list[tuple[float, int]]:
    """Greedy clients in virtual time, each as slot/pulsar/client.py behaves: ask for what is
    missing, come back (retry=True) after retry_after_s, ask again at once when served.
    Returns (time, granted) for every grant."""
    grants: list[tuple[float, int]] = []
    # (time, client, permits still missing, retry)
    wakeups = [(start_s, c, n, False) for c in range(clients)]
    heapq.heapify(wakeups)
    end_s = start_s + duration_s
    while wakeups and wakeups[0][0] < end_s:
        now, client, missing, retry = heapq.heappop(wakeups)
        grant = limiter.try_acquire(now, missing, retry=retry)
        if grant.granted:
            grants.append((now, grant.granted))
        if grant.granted == missing:
            # Served: the next action's request comes a moment later.
            heapq.heappush(wakeups, (now + 1e-4, client, n, False))
        else:
            assert grant.retry_after_s > 0
            heapq.heappush(wakeups, (now + grant.retry_after_s, client, missing - grant.granted, True))
    return grants


def total(grants: list[tuple[float, int]], *, since_s: float = -math.inf, until_s: float = math.inf) -> int:
    return sum(k for t, k in grants if since_s <= t < until_s)


def test_ten_per_second_come_one_every_tenth_of_a_second_not_ten_at_once() -> None:
    limiter = Limiter(10, 1.0)
    grants = run_clients(limiter, clients=1, duration_s=2.0)
    times = [t for t, _ in grants]
    assert all(k == 1 for _, k in grants)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps and min(gaps) == pytest.approx(0.1, abs=1e-3)
    assert total(grants, until_s=0.5) <= 6


def test_fifty_clients_together_get_the_configured_rate_over_virtual_time() -> None:
    limiter = Limiter(10, 1.0)
    grants = run_clients(limiter, clients=50, duration_s=20.0)
    assert 0.97 * 200 <= total(grants) <= 200 + limiter.capacity
    for second in range(20):
        assert total(grants, since_s=second, until_s=second + 1) <= 10 + limiter.capacity


def test_a_long_period_spreads_its_permits_evenly() -> None:
    limiter = Limiter(60, 60.0)
    grants = run_clients(limiter, clients=5, duration_s=30.0)
    assert 29 <= total(grants) <= 31
    assert max(total(grants, since_s=s, until_s=s + 5) for s in range(25)) <= 6


def test_a_fast_limiter_grants_in_small_bursts_of_its_capacity() -> None:
    limiter = Limiter(1000, 1.0)
    assert limiter.capacity == pytest.approx(100)
    grants = run_clients(limiter, clients=4, n=50, duration_s=2.0)
    assert 0.97 * 2000 <= total(grants) <= 2000 + 100


def test_clients_told_to_wait_get_turns_spaced_by_the_rate() -> None:
    limiter = Limiter(10, 1.0)
    assert limiter.try_acquire(0.0).granted == 1
    waits = [limiter.try_acquire(0.0).retry_after_s for _ in range(4)]
    assert waits == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_a_first_try_waits_behind_clients_told_to_come_back() -> None:
    limiter = Limiter(10, 1.0)
    limiter.try_acquire(0.0)
    told = limiter.try_acquire(0.0)
    assert told.retry_after_s == pytest.approx(0.1)
    newcomer = limiter.try_acquire(0.1)
    assert newcomer.granted == 0
    assert newcomer.retry_after_s == pytest.approx(0.1)
    assert limiter.try_acquire(0.1, retry=True).granted == 1


def test_a_request_above_the_capacity_is_granted_in_parts() -> None:
    limiter = Limiter(10, 1.0)
    first = limiter.try_acquire(0.0, 5)
    assert first.granted == 1
    assert first.retry_after_s == pytest.approx(0.1)
    second = limiter.try_acquire(0.1, 4, retry=True)
    assert second.granted == 1


def test_a_slow_down_halves_the_rate() -> None:
    limiter = Limiter(10, 1.0)
    limiter.report(0.0, SLOW_DOWN)
    assert limiter.state(0.0).current_per_s == pytest.approx(5.0)
    grants = run_clients(limiter, clients=20, duration_s=10.0)
    assert 0.97 * 50 <= total(grants) <= 50 + 1


def test_slow_downs_within_the_hold_time_are_one_cut() -> None:
    limiter = Limiter(10, 1.0, tuning=Tuning(decrease_hold_s=1.0))
    for i in range(30):
        limiter.report(i * 0.01, SLOW_DOWN)
    assert limiter.state(0.5).current_per_s == pytest.approx(5.0)
    limiter.report(1.5, SLOW_DOWN)
    assert limiter.state(1.5).current_per_s == pytest.approx(2.5)
    assert limiter.state(1.5).cuts == 2


def test_the_rate_is_never_cut_below_its_floor() -> None:
    limiter = Limiter(64, 1.0)
    for second in range(20):
        limiter.report(float(second * 2), SLOW_DOWN)
    assert limiter.state(40.0).current_per_s == pytest.approx(1.0)


def test_a_pause_stops_every_permit_until_it_ends() -> None:
    limiter = Limiter(10, 1.0)
    limiter.report(1.0, pause(3.0))
    during = limiter.try_acquire(2.0)
    assert during.granted == 0
    assert during.retry_after_s == pytest.approx(2.1)
    grants = run_clients(limiter, clients=10, start_s=2.0, duration_s=4.0)
    assert total(grants, until_s=4.0) == 0
    assert 18 <= total(grants, since_s=4.0) <= 21


def test_a_shorter_pause_does_not_end_a_longer_one() -> None:
    limiter = Limiter(10, 1.0)
    limiter.report(0.0, pause(10.0))
    limiter.report(1.0, pause(1.0))
    assert limiter.state(5.0).paused_for_s == pytest.approx(5.0)
    assert limiter.try_acquire(5.0).granted == 0


def test_successes_climb_back_to_the_configured_rate_and_no_higher() -> None:
    limiter = Limiter(10, 1.0, tuning=Tuning(recovery_s=20.0))
    limiter.report(0.0, SLOW_DOWN)
    for i in range(1, 51):
        limiter.report(i * 0.1, OK)
    # 5 s of successes climb 10 * 5 / 20 = 2.5 permits/s.
    assert limiter.state(5.0).current_per_s == pytest.approx(7.5)
    for i in range(51, 151):
        limiter.report(i * 0.1, OK)
    assert limiter.state(15.0).current_per_s == pytest.approx(10.0)


def test_a_long_silence_between_successes_counts_as_one_short_gap() -> None:
    limiter = Limiter(10, 1.0, tuning=Tuning(recovery_s=20.0, max_climb_gap_s=1.0))
    limiter.report(0.0, SLOW_DOWN)
    limiter.report(3600.0, OK)
    assert limiter.state(3600.0).current_per_s == pytest.approx(5.5)


def test_the_climbed_rate_gives_more_permits() -> None:
    limiter = Limiter(20, 1.0)
    limiter.report(0.0, SLOW_DOWN)
    slow = run_clients(limiter, clients=5, start_s=0.0, duration_s=5.0)
    for i in range(1, 401):
        limiter.report(5.0 + i * 0.05, OK)
    fast = run_clients(limiter, clients=5, start_s=25.0, duration_s=5.0)
    assert total(slow) == pytest.approx(50, abs=2)
    assert total(fast) == pytest.approx(100, abs=3)


def test_state_shows_rates_pause_and_counters() -> None:
    limiter = Limiter(100, 10.0)
    limiter.try_acquire(0.0)
    limiter.report(0.0, SLOW_DOWN)
    limiter.report(0.0, pause(2.0))
    state = limiter.state(0.5)
    assert state.configured_per_s == pytest.approx(10.0)
    assert state.current_per_s == pytest.approx(5.0)
    assert state.capacity == pytest.approx(1.0)
    assert state.paused_for_s == pytest.approx(1.5)
    assert (state.granted_total, state.cuts, state.pauses) == (1, 1, 1)


def test_a_limiter_refuses_zero_permits_and_bad_periods() -> None:
    with pytest.raises(ValueError, match="permits >= 1"):
        Limiter(0, 1.0)
    with pytest.raises(ValueError, match="period_s > 0"):
        Limiter(1, 0.0)
    with pytest.raises(ValueError, match="at least one permit"):
        Limiter(1, 1.0).try_acquire(0.0, 0)


def test_a_pause_needs_positive_seconds() -> None:
    with pytest.raises(ValueError, match="pause_s > 0"):
        pause(0)
    with pytest.raises(ValueError, match="pause_s > 0"):
        pause(math.inf)
