"""Each schedule's row in the cluster database: read by whoever shows it, written by the active
manager as it fires, and by an admin (pause, resume, run now) from the dashboard or the CLI.

The cursor and the tick in flight are whole milliseconds here (manager/schedules/ticks.py);
the table keeps them as unix seconds (columns `last_tick_unix`, `in_flight_unix`, unchanged
since 0003, so cursors stored before read as they were). A whole millisecond count divided by
1000 and multiplied back rounds to itself exactly (a double holds these to a microsecond), and
a cursor an older manager stored with float drift (1764000000.1999998) reads as its tick.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from config.schedules import ScheduleConfig
from manager.storage.db import ScheduleRow


@dataclass(frozen=True, slots=True)
class ScheduleState:
    name: str
    last_tick_ms: int | None = None
    in_flight_ms: int | None = None
    last_job_key: str | None = None
    last_fired_at_unix: float | None = None
    paused: bool = False
    run_requested_at_unix: float | None = None
    running_rule: ScheduleConfig | None = None  # what the active manager fires by this name


class ScheduleStates:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def all(self) -> dict[str, ScheduleState]:
        with Session(self.engine) as session:
            rows = session.scalars(select(ScheduleRow)).all()
            return {row.name: _state(row) for row in rows}

    def get(self, name: str) -> ScheduleState:
        with Session(self.engine) as session:
            row = session.get(ScheduleRow, name)
            return ScheduleState(name) if row is None else _state(row)

    def start(self, name: str, *, cursor: int, now_unix: float) -> None:
        """A schedule seen for the first time starts from `cursor` (nothing before it fires)."""
        self._update(name, now_unix, last_tick_unix=_unix(cursor))

    def begin_fire(self, name: str, tick_ms: int, *, now_unix: float) -> None:
        self._update(name, now_unix, in_flight_unix=_unix(tick_ms))

    def fired(self, name: str, *, tick_ms: int | None, key: str, now_unix: float,
              manual: bool = False) -> None:
        """The PUT of `key` was acknowledged: the tick is handled (or the "run now" done)."""
        changes: dict[str, object] = {"last_job_key": key, "last_fired_at_unix": now_unix}
        if manual:
            changes["run_requested_at_unix"] = None
        else:
            changes.update(in_flight_unix=None, last_tick_unix=_unix(tick_ms))
        self._update(name, now_unix, **changes)

    def passed_over(self, name: str, *, cursor: int, now_unix: float) -> None:
        """Ticks up to `cursor` were missed (the catch-up policy fired none of them), or the
        clock was stepped back and the cursor re-anchored at now."""
        self._update(name, now_unix, last_tick_unix=_unix(cursor))

    def set_paused(self, name: str, paused: bool, *, now_unix: float) -> bool:
        """Pause or resume; whether it was paused before."""
        was = self.get(name).paused
        self._update(name, now_unix, paused=paused)
        return was

    def request_run(self, name: str, *, now_unix: float) -> None:
        self._update(name, now_unix, run_requested_at_unix=now_unix)

    def set_running(self, rules: Mapping[str, ScheduleConfig], *, now_unix: float) -> None:
        """The rules the active manager fires from now on (at its start and each reload)."""
        with Session(self.engine) as session, session.begin():
            rows = {row.name: row for row in session.scalars(select(ScheduleRow).with_for_update())}
            for name in set(rows) | set(rules):
                row = rows.get(name)
                if row is None:
                    row = ScheduleRow(name=name, paused=False, updated_at_unix=now_unix)
                    session.add(row)
                rule = rules.get(name)
                row.running_rule = None if rule is None else rule.model_dump_json()

    def _update(self, name: str, now_unix: float, **changes: object) -> None:
        with Session(self.engine) as session, session.begin():
            row = session.get(ScheduleRow, name, with_for_update=True)
            if row is None:
                row = ScheduleRow(name=name, paused=False, updated_at_unix=now_unix)
                session.add(row)
            for field, value in changes.items():
                setattr(row, field, value)
            row.updated_at_unix = now_unix


def _state(row: ScheduleRow) -> ScheduleState:
    return ScheduleState(
        name=row.name, last_tick_ms=_ms(row.last_tick_unix), in_flight_ms=_ms(row.in_flight_unix),
        last_job_key=row.last_job_key, last_fired_at_unix=row.last_fired_at_unix,
        paused=bool(row.paused), run_requested_at_unix=row.run_requested_at_unix,
        running_rule=_rule(row.running_rule),
    )


def _rule(text: str | None) -> ScheduleConfig | None:
    """The stored rule; one this code cannot read (written by another version) shows as none."""
    if text is None:
        return None
    try:
        return ScheduleConfig.model_validate_json(text)
    except ValueError:
        return None


def _unix(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def _ms(unix: float | None) -> int | None:
    return None if unix is None else round(unix * 1000)
