"""Which ticks of a schedule are due, and which were missed (pure: times passed in as whole
milliseconds since the epoch).

Ticks are integers: an `every_s` tick is `index * step_ms` for a whole tick index, a cron
tick is a whole second (the cron library's) times 1000, and the cursor (the newest tick
handled) is one of those integers. No tick is ever derived from another by float arithmetic,
so a tick compares equal to itself however it was reached (issue 25: `every_s = 1.2` once
made `round(tick - step, 6)` differ from `floor(t / step) * step` and fired a tick twice).

A tick is on time while it is at most `MISFIRE_GRACE_S` old: a manager that hiccups, or a
standby taking over within that long, still fires it. Older ticks were missed (an outage, a
restart), and the schedule's `catch_up` decides: skip fires none, latest the newest (unless
an on-time tick already runs now), all the newest `catch_up_max`. The ticks to fire go out
oldest first, at most `most` in one pass (the firing thread's bound, so one schedule catching
up 10,000 ticks never holds the others back); the cursor only moves forward through them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

from config.schedules import ScheduleConfig

# Longer than a standby's takeover (the lock is polled every 0.5 s, a manager starts in
# about a second on a busy machine) with room for a stalled database write; short enough
# that a 10 s outage is an outage.
MISFIRE_GRACE_S = 5.0
GRACE_MS = int(MISFIRE_GRACE_S * 1000)
# The wall clock reads this far before the cursor: it was stepped back (an operator, NTP
# after a clock ran ahead, a VM restored). Less is the skew between two managers' clocks,
# which only delays the next tick until the clock passes the cursor; more re-anchors the
# cursor at now (otherwise nothing would fire until the clock caught up, an hour for an hour).
STEP_BACK_MS = GRACE_MS
# Missed cron ticks are counted back this far at most (a cron of every minute missed for a
# year would be 525,600 steps of the cron library); every_s counts by arithmetic.
MAX_COUNTED = 100_000


def unix_to_ms(unix: float) -> int:
    """A wall-clock reading as whole milliseconds (floored: a tick at or before it is passed)."""
    return math.floor(unix * 1000)


def step_ms(rule: ScheduleConfig) -> int:
    assert rule.every_s is not None
    return round(rule.every_s * 1000)  # config/schedules.py: every_s is whole milliseconds


def tick_key(name: str, tick_ms: int) -> str:
    """The fired job's key: the same for every manager that fires this tick."""
    seconds, millis = divmod(tick_ms, 1000)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if millis:
        stamp += f".{millis:03d}"
    return f"{name}@{stamp}Z"


def manual_key(name: str, requested_unix: float) -> str:
    """The key of a "run now" fire, from when it was asked (asked twice: still one job)."""
    return tick_key(name, unix_to_ms(requested_unix)).replace("@", "@manual-", 1)


def ticks_back(rule: ScheduleConfig, *, after: int, until: int, most: int) -> list[int]:
    """Ticks in (after, until], newest first, at most `most` of them."""
    if until <= after or most <= 0:
        return []
    if rule.every_s is not None:
        step = step_ms(rule)
        newest, first = until // step, after // step + 1
        count = min(most, newest - first + 1)
        return [index * step for index in range(newest, newest - count, -1)]
    assert rule.cron is not None
    zone = ZoneInfo(rule.timezone)
    # Backwards from just past `until`: the cron library yields ticks strictly before its start.
    start = datetime.fromtimestamp(until // 1000, zone) + timedelta(seconds=1)
    found: list[int] = []
    for moment in CronSim(rule.cron, start, reverse=True):
        at = round(moment.timestamp()) * 1000
        if at > until:
            continue
        if at <= after or len(found) >= most:
            break
        found.append(at)
    return found


def count_ticks(rule: ScheduleConfig, *, after: int, until: int) -> tuple[int, bool]:
    """How many ticks in (after, until], and whether that is all of them (cron counts to
    MAX_COUNTED at most)."""
    if until <= after:
        return 0, True
    if rule.every_s is not None:
        step = step_ms(rule)
        return max(0, until // step - after // step), True
    found = len(ticks_back(rule, after=after, until=until, most=MAX_COUNTED + 1))
    return min(found, MAX_COUNTED), found <= MAX_COUNTED


def next_tick(rule: ScheduleConfig, now: int) -> int:
    """The first tick after `now`."""
    if rule.every_s is not None:
        step = step_ms(rule)
        return (now // step + 1) * step
    assert rule.cron is not None
    start = datetime.fromtimestamp(now // 1000, ZoneInfo(rule.timezone))
    return round(next(iter(CronSim(rule.cron, start))).timestamp()) * 1000


@dataclass(frozen=True, slots=True)
class Due:
    fire: tuple[int, ...]           # ticks to put in this pass, oldest first (at most `most`)
    missed: int                     # ticks passed over by the catch-up policy
    counted_all: bool               # False when more than MAX_COUNTED were missed
    late: int                       # missed ticks fired anyway (latest, all), over all passes
    skip_to: int | None             # the cursor moves here before firing (past the missed ticks)
    newest: int                     # the newest tick at or before now (the cursor when paused)
    more: bool                      # ticks left for the next pass beyond `most`
    edge: int                       # ticks after it were on time: pass it back while `more`
    stepped_back_ms: int = 0        # > 0: the clock read this much before the cursor


def due(rule: ScheduleConfig, *, cursor: int, now: int, most: int, edge: int | None = None) -> Due:
    """What to fire at `now`, given the cursor (the newest tick handled).

    `edge`: the `Due.edge` of the pass that left ticks over (`more`): a tick that was on time
    then and waits only for its share of a pass is not missed when it grows older than the
    grace (with catch_up = "skip" it would be dropped otherwise)."""
    if now < cursor - STEP_BACK_MS:
        return Due((), 0, True, 0, skip_to=now, newest=now, more=False, edge=now - GRACE_MS,
                   stepped_back_ms=cursor - now)
    edge = now - GRACE_MS if edge is None else min(edge, now - GRACE_MS)  # after it: on time
    on_time = ticks_back(rule, after=max(cursor, edge), until=now, most=MAX_COUNTED)
    keep = {"all": rule.catch_up_max, "latest": 0 if on_time else 1, "skip": 0}[rule.catch_up]
    late = ticks_back(rule, after=cursor, until=min(now, edge), most=keep + 1)
    kept = late[:keep]
    missed, counted_all, skip_to = 0, True, None
    if len(late) > keep:
        skip_to = late[keep]
        missed, counted_all = count_ticks(rule, after=cursor, until=skip_to)
    queue = kept[::-1] + on_time[::-1]
    newest = on_time[0] if on_time else late[0] if late else cursor
    return Due(tuple(queue[:most]), missed, counted_all, len(kept), skip_to, newest, len(queue) > most, edge)
