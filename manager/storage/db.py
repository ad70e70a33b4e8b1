"""The manager's history tables (SQLAlchemy 2.0): what the dashboard reads.

The manager writes one row per queue and per host every planning interval, the slot map
it decided, and its events; the dashboard only reads, except `queue_overrides` (runtime
pause and min/max changes by an admin, which the manager applies at its next plan).
Times are unix seconds (float) so SQLite and PostgreSQL store them alike.
"""
from __future__ import annotations

import sqlite3
import time

from sqlalchemy import JSON, BigInteger, Boolean, Float, Index, Integer, String, Text, create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class QueueSample(Base):
    """One queue over one planning interval."""

    __tablename__ = "queue_samples"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at_unix: Mapped[float] = mapped_column(Float, index=True)
    queue: Mapped[str] = mapped_column(String(128))
    priority: Mapped[int] = mapped_column(Integer)
    min_slots: Mapped[int] = mapped_column(Integer)
    max_slots: Mapped[int] = mapped_column(Integer)
    slots_current: Mapped[int] = mapped_column(Integer)
    slots_avg: Mapped[float] = mapped_column(Float)  # over the stats window
    slots_desired: Mapped[int] = mapped_column(Integer)
    load: Mapped[float] = mapped_column(Float)  # 1.0 = 100%; may exceed 1 (backlog)
    waiting: Mapped[int] = mapped_column(Integer)  # ready jobs
    running: Mapped[int] = mapped_column(Integer)  # locked jobs
    delayed: Mapped[int] = mapped_column(Integer)
    jobs_done: Mapped[int] = mapped_column(Integer)  # in the interval
    jobs_per_s: Mapped[float] = mapped_column(Float)
    mean_job_s: Mapped[float] = mapped_column(Float)
    errors: Mapped[int] = mapped_column(Integer)  # in the interval
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    # What the slots use (the masters' reports); None while no master has the queue's handler.
    batch_size: Mapped[int | None] = mapped_column(Integer, nullable=True)
    batch_size_source: Mapped[str | None] = mapped_column(String(16), nullable=True)  # config | handler
    # The queue server's failed (waiting for a retry, also in delayed) and dead jobs now; None in
    # samples from before migration 0005.
    failed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    dead: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # False: a queue the queue server holds jobs of, that no config names (no slot ever serves it).
    configured: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # Whether some live master has the queue's handler (reports its settings); None: not known.
    handled: Mapped[bool | None] = mapped_column(Boolean, nullable=True)

    __table_args__ = (Index("ix_queue_samples_queue_at", "queue", "at_unix"),)


class HostSample(Base):
    """One host (its master's report) at one planning interval."""

    __tablename__ = "host_samples"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at_unix: Mapped[float] = mapped_column(Float, index=True)
    host: Mapped[str] = mapped_column(String(255))
    alive: Mapped[bool] = mapped_column(Boolean)
    capacity: Mapped[int] = mapped_column(Integer)
    slots: Mapped[int] = mapped_column(Integer)
    mem_total_bytes: Mapped[int] = mapped_column(BigInteger)
    mem_available_bytes: Mapped[int] = mapped_column(BigInteger)
    master_pss_bytes: Mapped[int] = mapped_column(BigInteger)
    slots_pss_bytes: Mapped[int] = mapped_column(BigInteger)
    avg_slot_bytes: Mapped[int] = mapped_column(BigInteger)
    load_avg_1m: Mapped[float] = mapped_column(Float)
    recycled_for_memory: Mapped[int] = mapped_column(Integer)  # since the master started
    killed_hung: Mapped[int] = mapped_column(Integer)
    # Slots recycled after max_jobs_per_slot / max_slot_age_s since the master started (0010).
    recycled_for_jobs: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    recycled_for_age: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # "capped by load: ..." while the master's load bound sets its capacity (manager/hosts/load_caps.py).
    load_cap: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # The handler code's version (master/code_reload.py) and the last refused code reload
    # (master/reloading.py); None before 0007 and from masters of the release before.
    code_version: Mapped[str | None] = mapped_column(String(64), nullable=True)
    code_reload_failure: Mapped[str | None] = mapped_column(String(500), nullable=True)
    # Why queues' slots do not come up there (master/start_failures.py), as compact JSON
    # (manager/storage/samples.py stored_start_failures); None before 0012 and with none.
    start_failures: Mapped[str | None] = mapped_column(String(2000), nullable=True)

    __table_args__ = (Index("ix_host_samples_host_at", "host", "at_unix"),)


class SlotMapRow(Base):
    """The slot map as decided at one plan: slots per (host, queue)."""

    __tablename__ = "slot_map"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at_unix: Mapped[float] = mapped_column(Float, index=True)
    host: Mapped[str] = mapped_column(String(255))
    queue: Mapped[str] = mapped_column(String(128))
    slots: Mapped[int] = mapped_column(Integer)


class LiveSlots(Base):
    """What runs now, per queue (issue 28): rewritten by the active manager every half second
    from the masters' last reports, so the dashboard shows the slot map seconds before the
    next plan's samples. One row per queue with a slot or a plan; rows of one write share
    `at_unix`."""

    __tablename__ = "live_slots"
    queue: Mapped[str] = mapped_column(String(128), primary_key=True)
    running: Mapped[int] = mapped_column(Integer)  # slots the masters report running it
    assigned: Mapped[int] = mapped_column(Integer)  # slots the manager's map gives it
    at_unix: Mapped[float] = mapped_column(Float)  # when the manager wrote the row
    # How old the oldest live master's report was then: the count is this much older.
    reports_age_s: Mapped[float] = mapped_column(Float)


class Event(Base):
    """A decision or happening: slots moved, master lost/back, queue paused, admin action."""

    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at_unix: Mapped[float] = mapped_column(Float, index=True)
    kind: Mapped[str] = mapped_column(String(64), index=True)
    queue: Mapped[str | None] = mapped_column(String(128), nullable=True)
    host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    actor: Mapped[str] = mapped_column(String(64), default="manager")
    message: Mapped[str] = mapped_column(Text)
    detail: Mapped[dict[str, object] | None] = mapped_column(JSON, nullable=True)


class QueueOverride(Base):
    """Runtime changes an admin made to a queue; the manager applies them at its next plan."""

    __tablename__ = "queue_overrides"
    queue: Mapped[str] = mapped_column(String(128), primary_key=True)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    min_slots: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_slots: Mapped[int | None] = mapped_column(Integer, nullable=True)
    updated_at_unix: Mapped[float] = mapped_column(Float)


class ScheduleRow(Base):
    """Where each schedule stands: the last tick handled, a fire under way, an admin's pause or
    "run now". The active manager writes it; a manager taking over reads it."""

    __tablename__ = "schedules"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    last_tick_unix: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Written before the tick's PUT and cleared after it: a successor puts it again (same key).
    in_flight_unix: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_job_key: Mapped[str | None] = mapped_column(String(160), nullable=True)
    last_fired_at_unix: Mapped[float | None] = mapped_column(Float, nullable=True)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    run_requested_at_unix: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at_unix: Mapped[float] = mapped_column(Float)
    # The rule the active manager fires (ScheduleConfig as JSON), NULL when it fires none by
    # this name: readers of the file see where it differs from what runs (0009).
    running_rule: Mapped[str | None] = mapped_column(String(2048), nullable=True)


class ManagerRequest(Base):
    """An admin's request to the active manager (a config reload) from the API or the CLI,
    which may run on another host than the manager: it takes unhandled rows every second."""

    __tablename__ = "manager_requests"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))
    door: Mapped[str] = mapped_column(String(16))
    requested_at_unix: Mapped[float] = mapped_column(Float)
    handled_at_unix: Mapped[float | None] = mapped_column(Float, nullable=True)


class QueueAuthority(Base):
    """Who is the queue servers' primary, in which epoch: one row, changed only by the
    active manager with compare-and-set on the epoch (manager/failover/sentinel.py)."""

    __tablename__ = "queue_authority"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)  # always 1
    epoch: Mapped[int] = mapped_column(BigInteger)
    primary: Mapped[str] = mapped_column(String(255))  # HOST:PORT
    # False once the primary went on alone (sync_fallback = "async"): no replica is in
    # sync, so none may be promoted without an operator.
    in_sync: Mapped[bool] = mapped_column(Boolean, default=True)
    sync_replicas: Mapped[str] = mapped_column(Text, default="")  # HOST:PORT,... at the last look
    # The confirmations the primary reported it waits for (ROLE's <min-sync>, 0: async);
    # NULL: not reported. The sentinel judges a promotion by it, not by its own config.
    min_sync_replicas: Mapped[int | None] = mapped_column(Integer, nullable=True, default=None)
    updated_at_unix: Mapped[float] = mapped_column(Float)


WAL_SWITCH_DEADLINE_S = 30.0
WAL_SWITCH_RETRY_S = 0.05


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL so the dashboard reads while the manager writes."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30})

        from sqlalchemy import event

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            cursor = dbapi_connection.cursor()
            _use_wal(cursor)
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def _use_wal(cursor: sqlite3.Cursor) -> None:
    """WAL mode, kept in the file once set. Switching waits for no busy timeout: a manager
    starting while a reader had the new file open failed with "database is locked"; so
    it is switched only when not yet WAL, and tried again while the file is locked."""
    deadline = time.monotonic() + WAL_SWITCH_DEADLINE_S
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(WAL_SWITCH_RETRY_S)
