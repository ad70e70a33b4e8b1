"""The manager's history in SQL (manager/storage/db.py tables): migrations, rows per plan, overrides, retention.

Row builders live in manager/storage/samples.py; Store does the I/O.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sqlalchemy import delete, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from config.models import QueueConfig
from manager.storage.db import (
    Event,
    HostSample,
    LiveSlots,
    QueueOverride,
    QueueSample,
    SlotMapRow,
    make_engine,
)

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"  # manager/migrations
SECONDS_PER_DAY = 86400.0


class EventKind(StrEnum):
    """Every kind written to events.kind, by the manager or by an admin on the dashboard.

    The values are stored: changing one hides its old rows from the dashboard's filters.
    """

    MANAGER_ACTIVE = "manager_active"
    MASTER_JOINED = "master_joined"
    MASTER_BACK = "master_back"
    MASTER_RESTARTED = "master_restarted"
    MASTER_LOST = "master_lost"
    MASTER_LEFT = "master_left"
    SLOTS_MOVED = "slots_moved"
    OVERRIDE_APPLIED = "override_applied"
    QUEUE_SERVER_UNREACHABLE = "queue_server_unreachable"
    # The sentinel's (manager/failover/sentinel.py): failover of the queue servers.
    QUEUE_SERVER_PROMOTED = "queue_server_promoted"
    QUEUE_SERVER_DEMOTED = "queue_server_demoted"
    QUEUE_SYNC_LOST = "queue_sync_lost"
    QUEUE_SYNC_REGAINED = "queue_sync_regained"
    QUEUE_PROMOTION_REFUSED = "queue_promotion_refused"
    # The queue servers' min_sync_replicas differ from each other or from the manager's config,
    # or one was not started for managed failover (manager/failover/settings_check.py).
    QUEUE_SETTINGS_MISMATCH = "queue_settings_mismatch"
    # Frames refused at the master door (bad, out of bounds, spoofed, past max_hosts),
    # at most one per reason every few seconds (manager/events/refusals.py), with a count.
    PEER_REFUSED = "peer_refused"
    # From the queue server's counters at each plan (manager/events/failures.py), with a count.
    JOBS_FAILED = "jobs_failed"
    JOBS_DEAD = "jobs_dead"
    DEAD_JOBS_DROPPED = "dead_jobs_dropped"
    # A slot died unasked or was killed by its master (manager/events/crash_events.py), with a count.
    SLOT_CRASHED = "slot_crashed"
    # A master's load bound started or stopped setting its capacity (manager/hosts/load_caps.py).
    HOST_CAPPED_BY_LOAD = "host_capped_by_load"
    HOST_LOAD_CAP_LIFTED = "host_load_cap_lifted"
    # A master rolled its slots to new handler code, or refused it (manager/events/code_versions.py).
    HOST_CODE_RELOADED = "host_code_reloaded"
    HOST_CODE_RELOAD_REFUSED = "host_code_reload_refused"
    # A queue's handler could not start on a host (setup() raised, or its module failed to
    # import): once per distinct error, with the traceback's tail (manager/events/start_failures.py).
    HANDLER_START_FAILED = "handler_start_failed"
    # The manager's config reload (SIGHUP, manager/reloading/config_reload.py): what changed, or why not.
    CONFIG_RELOADED = "config_reloaded"
    CONFIG_RELOAD_REFUSED = "config_reload_refused"
    # An admin's actions on the dashboard (actor admin); the overrides wait in queue_overrides.
    PAUSE_REQUESTED = "pause_requested"
    RESUME_REQUESTED = "resume_requested"
    LIMITS_CHANGED = "limits_changed"
    JOBS_RETRIED = "jobs_retried"
    JOBS_DELETED = "jobs_deleted"
    JOB_CANCELLED = "job_cancelled"  # detail.door: api, dashboard (admin_ui), cli or a client's name (the manager)
    LIMITER_RESUMED = "limiter_resumed"
    # Schedules (manager/schedules): ticks the catch-up policy passed over or fired late, and
    # an admin's pause, resume and "run now" from any door (detail.door: cli, api, dashboard).
    SCHEDULE_TICKS_MISSED = "schedule_ticks_missed"
    SCHEDULE_CAUGHT_UP = "schedule_caught_up"
    SCHEDULE_PAUSED = "schedule_paused"
    SCHEDULE_RESUMED = "schedule_resumed"
    SCHEDULE_RUN_REQUESTED = "schedule_run_requested"
    SCHEDULE_CLOCK_STEPPED_BACK = "schedule_clock_stepped_back"


@dataclass(frozen=True, slots=True)
class NewEvent:
    kind: EventKind
    message: str
    queue: str | None = None
    host: str | None = None
    actor: str = "manager"
    detail: Mapping[str, object] | None = None


@dataclass(frozen=True, slots=True)
class Override:
    queue: str
    paused: bool
    min_slots: int | None
    max_slots: int | None
    updated_at_unix: float


# Migrations


def upgrade(engine: Engine) -> None:
    """`alembic upgrade head` on this engine (creates every table on an empty database)."""
    # Imported here: only the manager migrates, and alembic (with mako and pygments) costs
    # 0.2 s of CPU to import, which the dashboard and the CLI commands reading the store skip.
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.connect() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        connection.commit()


def open_engine(url: str) -> Engine:
    """An engine for `url`, creating the SQLite file's folder when needed."""
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    return make_engine(url)


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (any driver, as written); None for other databases
    and in-memory SQLite."""
    from manager.storage.database_identity import identify

    try:
        return identify(url).path
    except ValueError:
        return None


def event_row(at_unix: float, event: NewEvent) -> Event:
    return Event(
        at_unix=at_unix,
        kind=str(event.kind),
        queue=event.queue,
        host=event.host,
        actor=event.actor,
        message=event.message,
        detail=dict(event.detail) if event.detail is not None else None,
    )


# I/O


class Store:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str, *, migrate: bool = True) -> Store:
        engine = open_engine(url)
        if migrate:
            upgrade(engine)
        return cls(engine)

    @classmethod
    def connect(cls, url: str) -> Store:
        """The store as the dashboard opens it: no folder is made and nothing is migrated, since
        the manager alone creates and upgrades its tables."""
        return cls(make_engine(url))

    @property
    def database(self) -> str:
        """The database's URL without its password, to show and log."""
        return self.engine.url.render_as_string(hide_password=True)

    def write(self, rows: Sequence[object]) -> None:
        """Add every row in one transaction."""
        with Session(self.engine) as session, session.begin():
            session.add_all(rows)

    def replace_live(self, rows: Sequence[LiveSlots]) -> None:
        """The live slot counts (manager/hosts/live.py): the old rows go, the new come, in one
        transaction, so a reader sees one write or the other."""
        with Session(self.engine) as session, session.begin():
            session.execute(delete(LiveSlots))
            session.add_all(rows)

    def add_events(self, at_unix: float, events: Iterable[NewEvent]) -> None:
        rows = [event_row(at_unix, event) for event in events]
        if rows:
            self.write(rows)

    def add_event(self, at_unix: float, event: NewEvent) -> int:
        """Store one event; its id."""
        with Session(self.engine) as session, session.begin():
            row = event_row(at_unix, event)
            session.add(row)
            session.flush()
            return row.id

    def save_override(self, at_unix: float, override: Override, event: NewEvent) -> int:
        """Store an admin's override of a queue (replacing the one before) and its event in one
        transaction; the event's id."""
        with Session(self.engine) as session, session.begin():
            session.merge(QueueOverride(
                queue=override.queue, paused=override.paused, min_slots=override.min_slots,
                max_slots=override.max_slots, updated_at_unix=override.updated_at_unix,
            ))
            row = event_row(at_unix, event)
            session.add(row)
            session.flush()
            return row.id

    def overrides(self) -> dict[str, Override]:
        with Session(self.engine) as session:
            return {
                row.queue: Override(row.queue, row.paused, row.min_slots, row.max_slots,
                                    row.updated_at_unix)
                for row in session.scalars(select(QueueOverride))
            }

    def recent_hosts(self) -> set[str]:
        """Hosts alive in the last stored host samples (what a restarted manager waits for)."""
        with Session(self.engine) as session:
            latest = session.scalar(select(func.max(HostSample.at_unix)))
            if latest is None:
                return set()
            return set(session.scalars(
                select(HostSample.host).where(HostSample.at_unix == latest, HostSample.alive)
            ))

    def last_job_times(self) -> dict[str, float]:
        """Per queue, the mean job time of its newest sample that measured one (a new
        manager's memory of cold queues, manager/planning/job_times.py)."""
        measured = (QueueSample.jobs_done > 0) & (QueueSample.mean_job_s > 0)
        newest = (select(QueueSample.queue, func.max(QueueSample.at_unix).label("at"))
                  .where(measured).group_by(QueueSample.queue).subquery())
        with Session(self.engine) as session:
            rows = session.execute(
                select(QueueSample.queue, QueueSample.mean_job_s)
                .join(newest, (QueueSample.queue == newest.c.queue) & (QueueSample.at_unix == newest.c.at))
                .where(measured)
            )
            return {queue: float(job_s) for queue, job_s in rows}

    def prune(self, *, now_unix: float, retention_days: float) -> int:
        """Delete history older than retention_days; the number of rows deleted."""
        cutoff = now_unix - retention_days * SECONDS_PER_DAY
        deleted = 0
        with Session(self.engine) as session, session.begin():
            for table in (QueueSample, HostSample, SlotMapRow, Event):
                result = session.execute(delete(table).where(table.at_unix < cutoff))
                deleted += int(getattr(result, "rowcount", 0) or 0)
        return deleted

    def close(self) -> None:
        self.engine.dispose()


def apply_overrides(
    queues: Mapping[str, QueueConfig], overrides: Mapping[str, Override]
) -> dict[str, QueueConfig]:
    """The queue config with the admin's runtime changes: paused -> at most 0 slots."""
    result: dict[str, QueueConfig] = {}
    for name, config in queues.items():
        override = overrides.get(name)
        if override is None:
            result[name] = config
            continue
        max_slots = config.max_slots if override.max_slots is None else max(override.max_slots, 0)
        min_slots = config.min_slots if override.min_slots is None else max(override.min_slots, 0)
        if override.paused:
            max_slots = 0
        result[name] = config.model_copy(
            update={"min_slots": min(min_slots, max_slots), "max_slots": max_slots}
        )
    return result
