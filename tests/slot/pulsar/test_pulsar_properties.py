"""Properties of the limiter under any sequence of requests and feedback (hypothesis)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from slot.pulsar.limiter import Limiter
from slot.pulsar.protocol import OK, SLOW_DOWN, Feedback, pause

SLACK = 1e-6


@dataclass(frozen=True)
class Ask:
    n: int
    retry: bool
    reserve_s: float


Event = tuple[float, Ask | Feedback]

asks = st.builds(Ask, n=st.integers(1, 30), retry=st.booleans(),
                 reserve_s=st.one_of(st.just(0.0), st.floats(0.0, 2.0)))
feedback = st.one_of(
    st.just(OK), st.just(SLOW_DOWN), st.floats(0.001, 5.0).map(pause),
)
events = st.lists(
    st.tuples(st.floats(0.0, 1.0), st.one_of(asks, asks, asks, feedback)), min_size=1, max_size=150,
)


def replay(limiter: Limiter, steps: Sequence[Event], *, time_scale_s: float) -> list[tuple[float, int]]:
    grants: list[tuple[float, int]] = []
    now = 0.0
    for gap, event in steps:
        now += gap * time_scale_s
        if isinstance(event, Feedback):
            limiter.report(now, event)
            continue
        grant = limiter.try_acquire(now, event.n, retry=event.retry, reserve_s=event.reserve_s)
        assert 0 <= grant.granted <= event.n
        assert math.isfinite(grant.retry_after_s) and grant.retry_after_s >= 0
        if event.reserve_s == 0:
            assert (grant.granted < event.n) == (grant.retry_after_s > 0)
            assert grant.start_after_s == 0
        assert 0 <= grant.start_after_s <= min(event.reserve_s, limiter.tuning.max_reserve_s) + SLACK
        state = limiter.state(now)
        assert limiter.min_rate_per_s - SLACK <= state.current_per_s <= state.configured_per_s + SLACK
        if grant.granted:
            # A reserved permit is used at its turn: that is when it counts.
            grants.append((now + grant.start_after_s, grant.granted))
    return sorted(grants)


@settings(max_examples=300, deadline=None)
@given(
    permits=st.integers(1, 200),
    period_s=st.floats(0.05, 60.0),
    steps=events,
    time_scale=st.floats(0.0001, 2.0),
)
def test_grants_in_any_window_never_exceed_rate_times_window_plus_capacity(
    permits: int, period_s: float, steps: list[Event], time_scale: float,
) -> None:
    limiter = Limiter(permits, period_s)
    max_capacity = limiter.capacity
    rate = limiter.configured_per_s
    grants = replay(limiter, steps, time_scale_s=time_scale * period_s / permits * 5)
    for i, (start, _) in enumerate(grants):
        granted = 0
        for end, k in grants[i:]:
            granted += k
            assert granted <= rate * (end - start) + max_capacity + SLACK, (
                f"{granted} permits in [{start}, {end}] at {rate}/s, capacity {max_capacity}"
            )


@settings(max_examples=100, deadline=None)
@given(permits=st.integers(1, 100), period_s=st.floats(0.05, 60.0), pause_s=st.floats(0.01, 100.0),
       steps=events)
def test_no_permit_is_granted_during_a_pause(
    permits: int, period_s: float, pause_s: float, steps: list[Event],
) -> None:
    limiter = Limiter(permits, period_s)
    limiter.report(0.0, pause(pause_s))
    asks_only = [(gap, e) for gap, e in steps if isinstance(e, Ask)]
    grants = replay(limiter, asks_only, time_scale_s=pause_s / max(1, len(asks_only)))
    assert all(t >= pause_s for t, _ in grants)
