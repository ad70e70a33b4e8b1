"""Which ticks of a schedule are due, and which were missed (pure: times passed in, unix seconds).

A tick is on time while it is at most `MISFIRE_GRACE_S` old: a manager that hiccups, or a
standby taking over within that long, still fires it. Older ticks were missed (an outage, a
restart), and the schedule's `catch_up` decides: skip fires none, latest the newest (unless
an on-time tick already runs now), all the newest `catch_up_max`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim

from config.schedules import ScheduleConfig

# Longer than a standby's takeover (the lock is polled every 0.5 s, a manager starts in
# about a second on a busy machine) with room for a stalled database write; short enough
# that a 10 s outage is an outage.
MISFIRE_GRACE_S = 5.0
# Missed ticks are counted back this far at most (a cron of every minute missed for a
# year would be 525,600 steps of the cron library).
MAX_COUNTED = 100_000


def tick_key(name: str, tick_unix: float) -> str:
    """The fired job's key: the same for every manager that fires this tick."""
    moment = datetime.fromtimestamp(tick_unix, UTC)
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        stamp += f".{moment.microsecond // 1000:03d}"
    return f"{name}@{stamp}Z"


def manual_key(name: str, requested_unix: float) -> str:
    """The key of a "run now" fire, from when it was asked (asked twice: still one job)."""
    return tick_key(name, requested_unix).replace("@", "@manual-", 1)


def ticks_back(rule: ScheduleConfig, *, after: float, until: float, most: int) -> list[float]:
    """Ticks in (after, until], newest first, at most `most` of them."""
    if until <= after or most <= 0:
        return []
    if rule.every_s is not None:
        step = rule.every_s
        newest = math.floor(until / step) * step
        ticks: list[float] = []
        tick = newest
        while tick > after and len(ticks) < most:
            ticks.append(tick)
            tick = round(tick - step, 6)
        return ticks
    assert rule.cron is not None
    zone = ZoneInfo(rule.timezone)
    # Backwards from just past `until`: the cron library yields ticks strictly before its start.
    start = datetime.fromtimestamp(until, zone).replace(microsecond=0)
    found: list[float] = []
    for moment in CronSim(rule.cron, _just_after(start), reverse=True):
        at = moment.timestamp()
        if at > until:
            continue
        if at <= after or len(found) >= most:
            break
        found.append(at)
    return found


def next_tick(rule: ScheduleConfig, now: float) -> float:
    """The first tick after `now`."""
    if rule.every_s is not None:
        return (math.floor(now / rule.every_s) + 1) * rule.every_s
    assert rule.cron is not None
    start = datetime.fromtimestamp(now, ZoneInfo(rule.timezone))
    return next(iter(CronSim(rule.cron, start))).timestamp()


def _just_after(moment: datetime) -> datetime:
    return datetime.fromtimestamp(moment.timestamp() + 1, moment.tzinfo)


@dataclass(frozen=True, slots=True)
class Due:
    fire: tuple[float, ...]        # ticks to put now, oldest first
    missed: int                     # ticks passed over by the catch-up policy
    counted_all: bool               # False when more than MAX_COUNTED were missed
    caught_up: int                  # late ticks fired anyway (latest, all)
    cursor: float                   # the newest tick handled (fired or missed)


def due(rule: ScheduleConfig, *, last_tick: float | None, now: float) -> Due:
    """What to fire at `now`, given the last tick handled (None: the schedule is new, so it
    starts from now and fires nothing that came before)."""
    if last_tick is None:
        return Due((), 0, True, 0, now)
    passed = ticks_back(rule, after=last_tick, until=now, most=MAX_COUNTED + 1)
    if not passed:
        return Due((), 0, True, 0, last_tick)
    counted_all = len(passed) <= MAX_COUNTED
    passed = passed[:MAX_COUNTED]
    on_time = [tick for tick in passed if now - tick <= MISFIRE_GRACE_S]
    late = passed[len(on_time):]
    if rule.catch_up == "all":
        caught = late[:rule.catch_up_max]
    elif rule.catch_up == "latest" and not on_time:
        caught = late[:1]
    else:
        caught = []
    fire = sorted(on_time + caught)
    return Due(tuple(fire), len(late) - len(caught), counted_all, len(caught), passed[0])
