"""The active manager's schedule thread: puts each due tick once, keyed, and records it.

A thread of its own, so that a tick fires within a second of its time whatever the planner
or the masters' heartbeats are doing. One pass (`step`):

    for each enabled schedule:
        a fire left in flight by a manager that died   -> put again (same key), record
        an admin's "run now"                            -> put `<name>@manual-<time>`, clear it
        paused                                          -> nothing (ticks pass as missed)
        due(rule, last tick, now)                       -> put each tick, record each

Exactly once: the tick is written as in flight before its PUT and as handled after it, and
its key is the same for every manager. A successor finding a tick in flight puts it again;
the queue server answers EXISTS while the first job waits or runs, so it is one job. Only a
job already finished in that gap (the kill inside the ~1 ms between the PUT and the write,
and a slot done with it before the standby takes over) would run twice.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from config.periodic import TurnBoundary
from config.schedules import ScheduleConfig
from manager.schedules.state import ScheduleState, ScheduleStates
from manager.schedules.ticks import due, manual_key, next_tick, tick_key
from manager.store import EventKind, NewEvent
from queue_server.protocol.client_errors import QueueServerError

log = logging.getLogger(__name__)

# Admin requests (pause, run now) are read this often; ticks wake the thread on their own.
POLL_S = 0.25


@dataclass(frozen=True, slots=True)
class Job:
    queue: str
    data: str
    priority: int
    key: str


Put = Callable[[Job], None]
Note = Callable[[float, NewEvent], object]


class Firing:
    def __init__(self, rules: Mapping[str, ScheduleConfig], *, states: ScheduleStates, put: Put,
                 note: Note, wall_clock: Callable[[], float] = time.time) -> None:
        self.rules = {name: rule for name, rule in rules.items() if rule.enabled}
        self.states = states
        self.put = put
        self.note = note
        self.wall_clock = wall_clock
        self._failing: set[str] = set()
        # A database outage fails every pass, 4 a second: one traceback, then a count a minute.
        self.turns = TurnBoundary("the schedule pass", log=log, next_turn=f"the next pass in {POLL_S:.2f} s")

    def step(self, now: float) -> None:
        """One pass over every schedule; a schedule whose PUT fails is tried again next pass."""
        known = self.states.all()
        for name, rule in self.rules.items():
            state = known.get(name) or ScheduleState(name)
            try:
                self._step_one(name, rule, state, now)
            except QueueServerError as exc:
                if name not in self._failing:
                    log.warning("schedule %s: the queue server did not take its job (%s); "
                                "trying again every %.2f s", name, exc, POLL_S)
                self._failing.add(name)
            else:
                if name in self._failing:
                    log.info("schedule %s: the queue server takes its jobs again", name)
                self._failing.discard(name)

    def wait_s(self, now: float) -> float:
        """Until the next tick of any schedule, or the next look at admin requests."""
        soonest = min((next_tick(rule, now) for rule in self.rules.values()), default=now + POLL_S)
        return max(0.0, min(POLL_S, soonest - now))

    def run_until(self, stopping: Callable[[], bool]) -> None:
        while not stopping():
            pause_s = POLL_S
            with self.turns:  # the thread's boundary: the schedules must outlive a bad pass
                self.step(self.wall_clock())
                pause_s = self.wait_s(self.wall_clock())
            time.sleep(pause_s)

    def _step_one(self, name: str, rule: ScheduleConfig, state: ScheduleState, now: float) -> None:
        if state.in_flight_unix is not None:
            self._fire(name, rule, state.in_flight_unix, now)
        if state.run_requested_at_unix is not None:
            key = manual_key(name, state.run_requested_at_unix)
            self.put(Job(rule.queue, rule.data, rule.priority, key))
            self.states.fired(name, tick_unix=None, key=key, now_unix=now, manual=True)
            log.info("schedule %s: run now, job %s", name, key)
        if state.last_tick_unix is None:
            self.states.start(name, cursor=now, now_unix=now)
            return
        plan = due(rule, last_tick=state.last_tick_unix, now=now)
        if state.paused:
            # Ticks pass unfired, and are not caught up at resume: a pause skips them.
            if plan.cursor != state.last_tick_unix:
                self.states.passed_over(name, cursor=plan.cursor, now_unix=now)
            return
        if plan.missed:
            counted = "" if plan.counted_all else "more than "
            self.note(now, NewEvent(
                kind=EventKind.SCHEDULE_TICKS_MISSED, queue=rule.queue,
                message=f"schedule {name}: {counted}{plan.missed} ticks missed (catch_up = {rule.catch_up})",
                detail={"schedule": name, "missed": plan.missed, "catch_up": rule.catch_up},
            ))
        if plan.caught_up:
            self.note(now, NewEvent(
                kind=EventKind.SCHEDULE_CAUGHT_UP, queue=rule.queue,
                message=f"schedule {name}: {plan.caught_up} missed ticks fired late (catch_up = {rule.catch_up})",
                detail={"schedule": name, "fired": plan.caught_up, "catch_up": rule.catch_up},
            ))
        for tick in plan.fire:
            self.states.begin_fire(name, tick, now_unix=now)
            self._fire(name, rule, tick, now)
        last_fired = plan.fire[-1] if plan.fire else state.last_tick_unix
        if plan.cursor != last_fired:
            self.states.passed_over(name, cursor=plan.cursor, now_unix=now)

    def _fire(self, name: str, rule: ScheduleConfig, tick: float, now: float) -> None:
        key = tick_key(name, tick)
        self.put(Job(rule.queue, rule.data, rule.priority, key))
        self.states.fired(name, tick_unix=tick, key=key, now_unix=now)
        log.debug("schedule %s: tick %s put (%.3f s after its time)", name, key, now - tick)


class FiringThread:
    """`Firing.run_until` on a daemon thread, stopped with the manager."""

    def __init__(self, firing: Firing, *, on_stop: Callable[[], None] | None = None) -> None:
        self._stop = threading.Event()
        self._on_stop = on_stop
        self._thread = threading.Thread(target=firing.run_until, args=(self._stop.is_set,),
                                        name="schedules", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        if self._on_stop is not None and not self._thread.is_alive():
            self._on_stop()
