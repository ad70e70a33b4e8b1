"""A schedule's ticks through our code: cron in a time zone across daylight saving, every_s, and
what each catch-up policy fires after an outage."""
from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from config.errors import ConfigError
from config.load import parse_config
from config.schedules import ScheduleConfig
from manager.schedules.ticks import (
    MISFIRE_GRACE_S,
    due,
    manual_key,
    next_tick,
    tick_key,
    ticks_back,
)

NEW_YORK = ZoneInfo("America/New_York")


def local(*parts: int) -> int:
    return round(datetime(*parts, tzinfo=NEW_YORK).timestamp()) * 1000  # type: ignore[misc,arg-type]


def shown(ticks: list[int]) -> list[str]:
    return sorted(datetime.fromtimestamp(t / 1000, NEW_YORK).isoformat() for t in ticks)


def test_a_0230_job_fires_once_on_the_spring_forward_day_right_after_the_change() -> None:
    rule = ScheduleConfig(cron="30 2 * * *", timezone="America/New_York", queue="q")
    ticks = ticks_back(rule, after=local(2026, 3, 7, 12), until=local(2026, 3, 9, 12), most=10)
    # 2026-03-08 02:00 EST jumps to 03:00 EDT: 02:30 never exists that day.
    assert shown(ticks) == ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]


def test_a_0130_job_fires_once_on_the_fall_back_day() -> None:
    rule = ScheduleConfig(cron="30 1 * * *", timezone="America/New_York", queue="q")
    ticks = ticks_back(rule, after=local(2026, 10, 31, 12), until=local(2026, 11, 2, 12), most=10)
    # 2026-11-01 01:00-02:00 happens twice (EDT, then EST): the job runs in the first.
    assert shown(ticks) == ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]


def test_every_s_ticks_are_whole_multiples_since_the_epoch_so_every_manager_agrees() -> None:
    rule = ScheduleConfig(every_s=10, queue="q")
    assert ticks_back(rule, after=1_000_000, until=1_035_500, most=10) == [1_030_000, 1_020_000, 1_010_000]
    assert next_tick(rule, 1_035_500) == 1_040_000


def test_a_ticks_key_is_the_schedule_and_its_utc_time() -> None:
    assert tick_key("nightly", 1764115200_000) == "nightly@2025-11-26T00:00:00Z"
    assert tick_key("often", 1764115201_200) == "often@2025-11-26T00:00:01.200Z"
    assert manual_key("nightly", 1764115200.25) == "nightly@manual-2025-11-26T00:00:00.250Z"


@pytest.mark.parametrize(("catch_up", "fired"), [
    ("skip", [t * 1000 for t in range(111, 116)]),
    ("latest", [t * 1000 for t in range(111, 116)]),
    ("all", [t * 1000 for t in range(101, 116)]),
])
def test_after_a_ten_second_outage_each_policy_fires_its_ticks(catch_up: str, fired: list[int]) -> None:
    rule = ScheduleConfig(every_s=1, queue="q", catch_up=catch_up)  # type: ignore[arg-type]
    plan = due(rule, cursor=100_000, now=115_200, most=100)
    assert list(plan.fire) == fired
    assert plan.newest == 115_000
    assert plan.missed == 15 - len(fired)
    assert MISFIRE_GRACE_S == 5.0  # the on-time ticks above are the last five seconds


def test_latest_fires_the_newest_missed_tick_when_none_is_on_time() -> None:
    rule = ScheduleConfig(cron="0 2 * * *", timezone="America/New_York", queue="q")
    plan = due(rule, cursor=local(2026, 1, 1, 2), now=local(2026, 1, 4, 9), most=100)
    assert shown(list(plan.fire)) == ["2026-01-04T02:00:00-05:00"]
    assert (plan.missed, plan.late) == (2, 1)


def test_all_fires_at_most_catch_up_max_of_the_newest_missed_ticks() -> None:
    rule = ScheduleConfig(every_s=60, queue="q", catch_up="all", catch_up_max=3)
    plan = due(rule, cursor=0, now=6_000_000, most=100)
    assert list(plan.fire) == [5_820_000, 5_880_000, 5_940_000, 6_000_000]
    assert plan.missed == 100 - 4 and plan.skip_to == 5_760_000


def test_a_catch_up_goes_out_in_shares_of_most_oldest_first() -> None:
    rule = ScheduleConfig(every_s=1, queue="q", catch_up="all", catch_up_max=50)
    plan = due(rule, cursor=0, now=100_000, most=20)
    # Late: ticks 1-95 (older than the grace), the newest 50 of them kept; on time: 96-100.
    assert list(plan.fire) == [t * 1000 for t in range(46, 66)] and plan.more
    assert (plan.missed, plan.skip_to, plan.late) == (45, 45_000, 50)
    rest = due(rule, cursor=65_000, now=100_000, most=20)
    assert rest.missed == 0 and rest.skip_to is None and rest.fire[0] == 66_000


def test_a_clock_stepped_back_re_anchors_at_now_and_a_small_skew_only_waits() -> None:
    rule = ScheduleConfig(every_s=1, queue="q")
    back = due(rule, cursor=3_600_000 + 10_000, now=10_000, most=20)
    assert back.stepped_back_ms == 3_600_000 and back.skip_to == 10_000 and back.fire == ()
    skewed = due(rule, cursor=12_000, now=10_000, most=20)
    assert skewed.stepped_back_ms == 0 and skewed.fire == () and skewed.skip_to is None


@pytest.mark.parametrize(("table", "says"), [
    ({"cron": "61 * * * *", "queue": "q"}, "cron '61 * * * *'"),
    ({"cron": "* * * *", "queue": "q"}, "must have 5 fields"),
    ({"queue": "q"}, "exactly one of cron and every_s"),
    ({"cron": "* * * * *", "every_s": 5, "queue": "q"}, "exactly one of cron and every_s"),
    ({"cron": "* * * * *", "timezone": "Mars/Olympus", "queue": "q"}, "unknown time zone"),
    ({"cron": "* * * * *", "timezone": "localtime", "queue": "q"}, "this machine's zone"),  # was taken
    ({"every_s": 0.5, "queue": "q"}, "greater than or equal to 1"),
    ({"every_s": float("nan"), "queue": "q"}, "finite number"),
    ({"every_s": 1.0005, "queue": "q"}, "whole number of milliseconds"),
    ({"every_s": 5, "queue": "q", "catch_up": "some"}, "'skip', 'latest' or 'all'"),
])
def test_a_bad_schedule_is_refused_at_load_saying_what_is_wrong(table: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError, match=r"schedules\.nightly") as caught:
        parse_config({"schedules": {"nightly": table}})
    assert says in str(caught.value)


def test_a_schedule_into_a_queue_no_config_names_is_flagged() -> None:
    config = parse_config({"queues": {"emails": {}},
                           "schedules": {"a": {"every_s": 5, "queue": "emails"},
                                         "b": {"every_s": 5, "queue": "emials"}}})
    assert config.schedules_without_queue_config() == ["b"]
