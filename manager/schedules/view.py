"""What `slotmap schedules`, `/api/schedules` and the Schedules page show: one row per schedule."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from config.schedules import ScheduleConfig
from manager.schedules.state import ScheduleState
from manager.schedules.ticks import next_tick, unix_to_ms

# The fired job's state as the queue server tells it; "done" when no job holds the key any
# more (a fired job is deleted when it is done), "unknown" when the server did not answer.
JobStateOf = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    name: str
    queue: str
    rule: str                       # "cron 30 2 * * * (Europe/Berlin)" or "every 10 s"
    catch_up: str
    enabled: bool
    paused: bool
    next_fire_unix: float | None    # None while disabled, paused or not fired by the manager
    last_job_key: str | None
    last_fired_at_unix: float | None
    last_job_state: str | None
    run_requested: bool
    # Where the file read here and the active manager differ ("" where they agree):
    # "not running" (in the file, the manager fires no such schedule: reload it), "not in the
    # file" (the manager fires one the file lacks), "manager runs: <rule>" (a different rule).
    manager_differs: str = ""


def describe(rule: ScheduleConfig) -> str:
    if rule.cron is not None:
        return f"cron {rule.cron} ({rule.timezone})"
    assert rule.every_s is not None
    # Whole milliseconds (config/schedules.py), written out in full: `:g` kept six digits, so
    # every_s = 1234.567 read "every 1234.57 s" and 31622400 "every 3.16224e+07 s".
    return f"every {f'{rule.every_s:.3f}'.rstrip('0').rstrip('.')} s"


def schedule_rows(rules: Mapping[str, ScheduleConfig], states: Mapping[str, ScheduleState], *,
                  now_unix: float, job_state: JobStateOf | None = None) -> list[ScheduleRow]:
    rows = []
    running = {name: state.running_rule for name, state in states.items() if state.running_rule is not None}
    for name, rule in sorted({**running, **rules}.items()):
        state = states.get(name) or ScheduleState(name)
        # The next fire is the rule the active manager fires (it differs from the file's until
        # a reload), none for one it does not fire; with no manager's rules known, the file's.
        firing = state.running_rule if running else rule
        next_fire = None
        if firing is not None and firing.enabled and not state.paused:
            next_fire = next_tick(firing, unix_to_ms(now_unix)) / 1000
        last_state = None
        if state.last_job_key is not None and job_state is not None:
            last_state = job_state(state.last_job_key)
        rows.append(ScheduleRow(
            name=name, queue=rule.queue, rule=describe(rule), catch_up=rule.catch_up,
            enabled=rule.enabled, paused=state.paused,
            next_fire_unix=next_fire,
            last_job_key=state.last_job_key, last_fired_at_unix=state.last_fired_at_unix,
            last_job_state=last_state, run_requested=state.run_requested_at_unix is not None,
            manager_differs=differs(rules.get(name), state.running_rule),
        ))
    return rows


def differs(in_file: ScheduleConfig | None, running: ScheduleConfig | None) -> str:
    if in_file is None:
        return "not in the file"
    if running is None:
        return "not running" if in_file.enabled else ""
    if in_file == running:
        return ""
    return f"manager runs: {describe(running)}, queue {running.queue}"
