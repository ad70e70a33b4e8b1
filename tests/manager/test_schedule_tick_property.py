"""Property: whatever the step (every_s 0.1-99.9 s, finer than the config allows, to stress the
arithmetic) and the catch-up policy, a manager passing at any times fires no tick twice and
passes none over silently: every tick is fired once or counted as missed by its policy, and
with passes never further apart than the grace every tick fires (issue 25, audit door 4)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from config.schedules import ScheduleConfig
from manager.schedules.ticks import GRACE_MS, due, ticks_back

EPOCH_MS = 1_764_115_200_000  # a real wall clock: drift shows at large magnitudes


def run(rule: ScheduleConfig, gaps_ms: list[int], most: int) -> tuple[list[int], int, int, int]:
    """The firing thread's use of `due` (manager/schedules/firing.py) over passes `gaps_ms` apart:
    the ticks fired in order, the ticks counted missed, the first cursor and the last now."""
    start = cursor = EPOCH_MS + 123
    now = start
    fired: list[int] = []
    missed = 0
    edge = None
    for gap in gaps_ms:
        now += gap
        plan = due(rule, cursor=cursor, now=now, most=most, edge=edge)
        edge = plan.edge if plan.more else None
        assert plan.stepped_back_ms == 0
        missed += plan.missed
        if plan.skip_to is not None:
            assert plan.skip_to >= cursor
            cursor = plan.skip_to
        for tick in plan.fire:
            assert tick > cursor, "the cursor only moves forward"
            cursor = tick
            fired.append(tick)
    # Drain what the bounded shares left (passes at once, no time passing).
    while (plan := due(rule, cursor=cursor, now=now, most=most, edge=edge)).fire:
        edge = plan.edge if plan.more else None
        missed += plan.missed
        cursor = plan.skip_to if plan.skip_to is not None else cursor
        fired += plan.fire
        cursor = plan.fire[-1]
    return fired, missed, start, now


@settings(max_examples=300, deadline=None)
@given(step_ds=st.integers(1, 999), catch_up=st.sampled_from(["skip", "latest", "all"]),
       catch_up_max=st.integers(1, 50), most=st.integers(1, 30),
       gaps_ms=st.lists(st.integers(1, 400_000), min_size=1, max_size=40))
def test_no_tick_fires_twice_and_none_is_passed_over_uncounted(
    step_ds: int, catch_up: str, catch_up_max: int, most: int, gaps_ms: list[int],
) -> None:
    rule = ScheduleConfig.model_construct(every_s=step_ds / 10, queue="q", catch_up=catch_up,
                                          catch_up_max=catch_up_max)
    fired, missed, start, end = run(rule, gaps_ms, most)
    assert len(fired) == len(set(fired)), "a tick fired twice"
    assert fired == sorted(fired)
    every = ticks_back(rule, after=start, until=end, most=10**7)[::-1]
    assert set(fired) <= set(every)
    assert len(fired) + missed == len(every), "a tick was neither fired nor counted missed"
    if all(gap <= GRACE_MS for gap in gaps_ms):
        assert fired == every, "a tick was skipped with no outage"


@settings(max_examples=200, deadline=None)
@given(step_ds=st.integers(1, 999), gaps_ms=st.lists(st.integers(1, 3_000), min_size=1, max_size=60))
def test_with_passes_within_the_grace_every_policy_fires_every_tick_once(step_ds: int, gaps_ms: list[int]) -> None:
    for catch_up in ("skip", "latest", "all"):
        rule = ScheduleConfig.model_construct(every_s=step_ds / 10, queue="q", catch_up=catch_up)
        fired, missed, start, end = run(rule, gaps_ms, 20)
        assert missed == 0
        assert fired == ticks_back(rule, after=start, until=end, most=10**7)[::-1]
