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


def local(*parts: int) -> float:
    return datetime(*parts, tzinfo=NEW_YORK).timestamp()  # type: ignore[misc]


def shown(ticks: list[float]) -> list[str]:
    return sorted(datetime.fromtimestamp(t, NEW_YORK).isoformat() for t in ticks)


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
    assert ticks_back(rule, after=1000.0, until=1035.5, most=10) == [1030.0, 1020.0, 1010.0]
    assert next_tick(rule, 1035.5) == 1040.0


def test_a_ticks_key_is_the_schedule_and_its_utc_time() -> None:
    assert tick_key("nightly", 1764115200.0) == "nightly@2025-11-26T00:00:00Z"
    assert manual_key("nightly", 1764115200.25) == "nightly@manual-2025-11-26T00:00:00.250Z"


@pytest.mark.parametrize(("catch_up", "fired"), [
    ("skip", [float(t) for t in range(111, 116)]),
    ("latest", [float(t) for t in range(111, 116)]),
    ("all", [float(t) for t in range(101, 116)]),
])
def test_after_a_ten_second_outage_each_policy_fires_its_ticks(catch_up: str, fired: list[float]) -> None:
    rule = ScheduleConfig(every_s=1, queue="q", catch_up=catch_up)  # type: ignore[arg-type]
    plan = due(rule, last_tick=100.0, now=115.2)
    assert list(plan.fire) == fired
    assert plan.cursor == 115.0
    assert plan.missed == 15 - len(fired)
    assert MISFIRE_GRACE_S == 5.0  # the on-time ticks above are the last five seconds


def test_latest_fires_the_newest_missed_tick_when_none_is_on_time() -> None:
    rule = ScheduleConfig(cron="0 2 * * *", timezone="America/New_York", queue="q")
    plan = due(rule, last_tick=local(2026, 1, 1, 2), now=local(2026, 1, 4, 9))
    assert shown(list(plan.fire)) == ["2026-01-04T02:00:00-05:00"]
    assert (plan.missed, plan.caught_up) == (2, 1)


def test_all_fires_at_most_catch_up_max_of_the_newest_missed_ticks() -> None:
    rule = ScheduleConfig(every_s=60, queue="q", catch_up="all", catch_up_max=3)
    plan = due(rule, last_tick=0.0, now=6000.0)
    assert list(plan.fire) == [5820.0, 5880.0, 5940.0, 6000.0]
    assert plan.missed == 100 - 4


def test_a_new_schedule_starts_from_now_and_fires_nothing_before() -> None:
    plan = due(ScheduleConfig(every_s=1, queue="q"), last_tick=None, now=50.5)
    assert plan.fire == () and plan.cursor == 50.5


@pytest.mark.parametrize(("table", "says"), [
    ({"cron": "61 * * * *", "queue": "q"}, "cron '61 * * * *'"),
    ({"cron": "* * * *", "queue": "q"}, "must have 5 fields"),
    ({"queue": "q"}, "exactly one of cron and every_s"),
    ({"cron": "* * * * *", "every_s": 5, "queue": "q"}, "exactly one of cron and every_s"),
    ({"cron": "* * * * *", "timezone": "Mars/Olympus", "queue": "q"}, "unknown time zone"),
    ({"every_s": 0.5, "queue": "q"}, "greater than or equal to 1"),
    ({"every_s": float("nan"), "queue": "q"}, "finite number"),
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
