"""The active manager's schedule thread: puts each due tick once, keyed, and records it.

A thread of its own, so that a tick fires within a second of its time whatever the planner
or the masters' heartbeats are doing. One pass (`step`):

    for each enabled schedule:
        a fire left in flight by a manager that died   -> put again (same key), record
        an admin's "run now"                            -> put `<name>@manual-<time>`, clear it
        paused                                          -> nothing (ticks pass as missed)
        clock read well before the cursor (stepped back) -> cursor to now, an event
        due(rule, cursor, now, most=TICKS_PER_PASS)      -> put each tick, record each

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
from manager.schedules.ticks import Due, due, manual_key, next_tick, tick_key, unix_to_ms
from manager.storage.store import EventKind, NewEvent
from queue_server.protocol.client_errors import QueueServerError

log = logging.getLogger(__name__)

# Admin requests (pause, run now) are read this often; ticks wake the thread on their own.
POLL_S = 0.25
# One schedule's share of a pass: a PUT and two row writes take ~4 ms on a busy box, so 20
# ticks hold the pass ~80 ms and every other schedule still fires within a second of its
# tick while one catches up 10,000 (issue 25; the next pass follows at once, no wait).
TICKS_PER_PASS = 20


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
        # Schedules with ticks left for the next pass, and the edge their on-time ticks had.
        self._more: dict[str, int] = {}
        self._catching: set[str] = set()    # schedules firing missed ticks (their event is out)
        # A database outage fails every pass, 4 a second: one traceback, then a count a minute.
        self._published = False  # the rules written to the schedules table (set_running)
        # New rules from a config reload (another thread), taken between passes.
        self._pending: dict[str, ScheduleConfig] | None = None
        self._pending_lock = threading.Lock()
        self.turns = TurnBoundary("the schedule pass", log=log, next_turn=f"the next pass in {POLL_S:.2f} s")

    def step(self, now: float) -> None:
        """One pass over every schedule; a schedule whose PUT fails is tried again next pass."""
        now_ms = unix_to_ms(now)
        if not self._published:
            self.states.set_running(self.rules, now_unix=now)
            self._published = True
        known = self.states.all()
        for name, rule in self.rules.items():
            state = known.get(name) or ScheduleState(name)
            try:
                self._step_one(name, rule, state, now, now_ms)
            except QueueServerError as exc:
                if name not in self._failing:
                    log.warning("schedule %s: the queue server did not take its job (%s); "
                                "trying again every %.2f s", name, exc, POLL_S)
                self._failing.add(name)
            else:
                if name in self._failing:
                    log.info("schedule %s: the queue server takes its jobs again", name)
                self._failing.discard(name)
        self._take_pending(now, now_ms)

    def replace_rules(self, rules: Mapping[str, ScheduleConfig]) -> None:
        """A config reload's schedules, taken at the end of the next pass (within POLL_S)."""
        with self._pending_lock:
            self._pending = dict(rules)

    def _take_pending(self, now: float, now_ms: int) -> None:
        """After a pass has fired every tick of the old rules up to now: an added or changed
        schedule goes on from now by its new rule (no tick of the old rule lost, none of the
        new one fired for the time before the change), a removed one stops."""
        with self._pending_lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        new = {name: rule for name, rule in pending.items() if rule.enabled}
        for name in set(self.rules) | set(new):
            if self.rules.get(name) == new.get(name):
                continue
            self._more.pop(name, None)
            self._catching.discard(name)
            self._failing.discard(name)
            if name in new:
                self.states.start(name, cursor=now_ms, now_unix=now)
        self.rules = new
        self._published = False

    def wait_s(self, now: float) -> float:
        """Until the next tick of any schedule, or the next look at admin requests; none while
        a schedule has ticks left over from its bounded share of the last pass."""
        if self._more:
            return 0.0
        now_ms = unix_to_ms(now)
        soonest = min((next_tick(rule, now_ms) / 1000 for rule in self.rules.values()), default=now + POLL_S)
        return max(0.0, min(POLL_S, soonest - now))

    def run_until(self, stopping: Callable[[], bool]) -> None:
        while not stopping():
            pause_s = POLL_S
            with self.turns:  # the thread's boundary: the schedules must outlive a bad pass
                self.step(self.wall_clock())
                pause_s = self.wait_s(self.wall_clock())
            time.sleep(pause_s)

    def _step_one(self, name: str, rule: ScheduleConfig, state: ScheduleState, now: float,
                  now_ms: int) -> None:
        if state.in_flight_ms is not None:
            self._fire(name, rule, state.in_flight_ms, now)
        if state.run_requested_at_unix is not None:
            key = manual_key(name, state.run_requested_at_unix)
            self.put(Job(rule.queue, rule.data, rule.priority, key))
            self.states.fired(name, tick_ms=None, key=key, now_unix=now, manual=True)
            log.info("schedule %s: run now, job %s", name, key)
        if state.last_tick_ms is None:
            self.states.start(name, cursor=now_ms, now_unix=now)
            return
        plan = due(rule, cursor=state.last_tick_ms, now=now_ms, most=TICKS_PER_PASS,
                   edge=self._more.pop(name, None))
        if plan.stepped_back_ms:
            self._stepped_back(name, rule, plan, now)
            return
        if state.paused:
            # Ticks pass unfired, and are not caught up at resume: a pause skips them.
            if plan.newest != state.last_tick_ms:
                self.states.passed_over(name, cursor=plan.newest, now_unix=now)
            return
        self._note_catch_up(name, rule, plan, now)
        if plan.skip_to is not None:
            self.states.passed_over(name, cursor=plan.skip_to, now_unix=now)
        for tick in plan.fire:
            self.states.begin_fire(name, tick, now_unix=now)
            self._fire(name, rule, tick, now)
        if plan.more:
            self._more[name] = plan.edge

    def _stepped_back(self, name: str, rule: ScheduleConfig, plan: Due, now: float) -> None:
        assert plan.skip_to is not None
        back_s = plan.stepped_back_ms / 1000
        log.warning("schedule %s: the wall clock reads %.3f s before the last tick handled (stepped "
                    "back); the schedule goes on from now", name, back_s)
        self.note(now, NewEvent(
            kind=EventKind.SCHEDULE_CLOCK_STEPPED_BACK, queue=rule.queue,
            message=f"schedule {name}: the clock was stepped back {back_s:.3f} s; ticks go on from now",
            detail={"schedule": name, "back_s": back_s},
        ))
        self.states.passed_over(name, cursor=plan.skip_to, now_unix=now)

    def _note_catch_up(self, name: str, rule: ScheduleConfig, plan: Due, now: float) -> None:
        if plan.missed:
            counted = "" if plan.counted_all else "more than "
            self.note(now, NewEvent(
                kind=EventKind.SCHEDULE_TICKS_MISSED, queue=rule.queue,
                message=f"schedule {name}: {counted}{plan.missed} ticks missed (catch_up = {rule.catch_up})",
                detail={"schedule": name, "missed": plan.missed, "catch_up": rule.catch_up},
            ))
        # A catch-up spans passes: its event goes out when it starts, not at each share.
        if not plan.late:
            self._catching.discard(name)
        elif name not in self._catching:
            self._catching.add(name)
            self.note(now, NewEvent(
                kind=EventKind.SCHEDULE_CAUGHT_UP, queue=rule.queue,
                message=f"schedule {name}: {plan.late} missed ticks fired late (catch_up = {rule.catch_up})",
                detail={"schedule": name, "fired": plan.late, "catch_up": rule.catch_up},
            ))

    def _fire(self, name: str, rule: ScheduleConfig, tick: int, now: float) -> None:
        key = tick_key(name, tick)
        self.put(Job(rule.queue, rule.data, rule.priority, key))
        self.states.fired(name, tick_ms=tick, key=key, now_unix=now)
        log.debug("schedule %s: tick %s put (%.3f s after its time)", name, key, now - tick / 1000)


class FiringThread:
    """`Firing.run_until` on a daemon thread, stopped with the manager."""

    def __init__(self, firing: Firing, *, on_stop: Callable[[], None] | None = None) -> None:
        self.firing = firing
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
