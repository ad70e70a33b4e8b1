"""An admin's pause, resume and "run now" of a schedule, from any door (cli, api, dashboard): the
schedule's row changes and an event says who asked through which door. The active manager's
firing thread picks the change up within a quarter second."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from config.schedules import ScheduleConfig
from manager.schedules.state import ScheduleStates
from manager.storage.store import EventKind, NewEvent, Store

Door = Literal["cli", "api", "dashboard"]
Action = Literal["pause", "resume", "run"]


class UnknownSchedule(LookupError):
    """No [schedules.<name>] with this name in the config."""


def act(store: Store, rules: Mapping[str, ScheduleConfig], name: str, action: Action, *,
        door: Door, now_unix: float, actor: str = "admin", client: str | None = None) -> str:
    """Do `action` to schedule `name`; the message recorded with its event."""
    rule = rules.get(name)
    if rule is None:
        known = ", ".join(sorted(rules)) or "none"
        raise UnknownSchedule(f"no schedule {name!r} in the config (known: {known})")
    states = ScheduleStates(store.engine)
    if action == "run":
        states.request_run(name, now_unix=now_unix)
        kind, message = EventKind.SCHEDULE_RUN_REQUESTED, f"run of schedule {name} requested"
    else:
        was = states.set_paused(name, action == "pause", now_unix=now_unix)
        kind = EventKind.SCHEDULE_PAUSED if action == "pause" else EventKind.SCHEDULE_RESUMED
        message = f"schedule {name} {'paused' if action == 'pause' else 'resumed'}"
        if was == (action == "pause"):
            message += f" (it was already {'paused' if was else 'running'})"
    message += f" by {actor} through the {door}"
    store.add_event(now_unix, NewEvent(kind=kind, message=message, queue=rule.queue, actor=actor,
                                       detail={"schedule": name, "door": door, "client": client}))
    return message
