"""Reading the manager's history (manager/storage/db.py tables) for the dashboard: typed records, no ORM rows.

StoreReads is one read of the tables (one session, opened by `reading(store)`): the dashboard
asks it for the newest samples, the slot map, a queue's history in buckets, events and the
counts /metrics adds up, and never sees a table or a query.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TypeVar

from sqlalchemy import Integer, and_, cast, func, inspect, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from manager.storage.db import Event, HostSample, LiveSlots, QueueOverride, QueueSample, SlotMapRow
from manager.storage.store import EventKind, Override, Store

# What the dashboard needs before it shows anything (the manager's first migration makes them).
TABLES = ("queue_samples", "host_samples", "slot_map", "events", "queue_overrides")


class DatabaseUnreadable(Exception):
    """The database cannot be opened at all (not there, no access); the text is the driver's."""


@dataclass(frozen=True, slots=True)
class LiveReading:
    """A queue's slots now (manager/hosts/live.py), written at `at_unix` from reports up to
    `reports_age_s` older."""

    queue: str
    running: int
    assigned: int
    at_unix: float
    reports_age_s: float


@dataclass(frozen=True, slots=True)
class QueueReading:
    """One queue over one planning interval, as the manager stored it (db.QueueSample)."""

    at_unix: float
    queue: str
    priority: int
    min_slots: int
    max_slots: int
    slots_current: int
    slots_avg: float
    slots_desired: int
    load: float
    waiting: int
    running: int
    delayed: int
    jobs_done: int
    jobs_per_s: float
    mean_job_s: float
    errors: int
    paused: bool
    batch_size: int | None
    batch_size_source: str | None  # config | handler; anything else is a newer manager's word
    failed: int | None  # None: stored before migration 0005
    dead: int | None
    configured: bool | None
    handled: bool | None


@dataclass(frozen=True, slots=True)
class HostReading:
    """One host's master report at one planning interval (db.HostSample)."""

    at_unix: float
    host: str
    alive: bool
    capacity: int
    slots: int
    mem_total_bytes: int
    mem_available_bytes: int
    master_pss_bytes: int
    slots_pss_bytes: int
    avg_slot_bytes: int
    load_avg_1m: float
    recycled_for_memory: int
    killed_hung: int
    load_cap: str | None  # "capped by load: ..." (None: not capped, or stored before 0006)
    code_version: str | None = None  # the handler code's hash (None: stored before 0007)
    code_reload_failure: str | None = None  # the last refused code reload, while it stands
    recycled_for_jobs: int = 0  # after max_jobs_per_slot (0: stored before 0010)
    recycled_for_age: int = 0  # after max_slot_age_s
    # Why queues' slots do not come up (JSON, manager/storage/samples.py; None: none, or before 0012).
    start_failures: str | None = None


@dataclass(frozen=True, slots=True)
class SlotMapCell:
    """Slots of one queue on one host in a stored plan."""

    at_unix: float
    host: str
    queue: str
    slots: int


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """kind is the stored text: an EventKind value, or a kind this code does not know."""

    id: int
    at_unix: float
    kind: str
    queue: str | None
    host: str | None
    actor: str
    message: str
    detail: dict[str, object] | None


@dataclass(frozen=True, slots=True)
class QueueBucket:
    """A queue's samples in one chart bucket: each figure averaged, at the newest sample's time."""

    at_unix: float
    slots_current: float
    slots_avg: float
    slots_desired: float
    min_slots: float
    max_slots: float
    load: float
    waiting: float
    running: float
    delayed: float
    jobs_per_s: float
    mean_job_s: float
    errors: float


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """Jobs done and errors of one queue summed over samples; last_id: the newest sample's id."""

    queue: str
    jobs_done: float
    errors: float
    last_id: int


@dataclass(frozen=True, slots=True)
class KindCount:
    kind: str
    count: int
    last_id: int


@dataclass(frozen=True, slots=True)
class EventQuery:
    """Which events: every field set must match; before_id pages back."""

    kind: str | None = None
    queue: str | None = None
    host: str | None = None
    since_unix: float | None = None
    until_unix: float | None = None
    before_id: int | None = None
    limit: int = 200


# The sample tables: one row per queue (host) per report, newest wanted per queue (host).
Sampled = TypeVar("Sampled", QueueSample, HostSample)
Record = TypeVar("Record", QueueReading, HostReading, StoredEvent, Override, LiveReading)
_BUCKET_FIGURES = tuple(field.name for field in fields(QueueBucket))[1:]


def to_record(row: object, record: type[Record]) -> Record:
    """`record` with each field read from the ORM row's attribute of the same name."""
    return record(**{field.name: getattr(row, field.name) for field in fields(record)})


@contextmanager
def reading(store: Store) -> Iterator[StoreReads]:
    """One read of the store's tables, in one session."""
    with Session(store.engine) as session:
        yield StoreReads(session)


class StoreReads:
    def __init__(self, session: Session) -> None:
        self.session = session

    def missing_tables(self) -> list[str]:
        """Tables the manager has not created yet (the dashboard shows a notice instead of data)."""
        try:
            inspector = inspect(self.session.connection())
        except OperationalError as exc:
            raise DatabaseUnreadable(str(exc.orig)) from exc
        return [name for name in TABLES if not inspector.has_table(name)]

    def _latest_at(self, column: object) -> float | None:
        value = self.session.scalar(select(func.max(column)))  # type: ignore[call-overload]
        return None if value is None else float(value)

    def _latest_per(self, model: type[Sampled], key: str, *, forget_after_s: float) -> list[Sampled]:
        """Each `key`'s newest row of `model`, for keys reported within `forget_after_s` of the newest row."""
        newest = self._latest_at(model.at_unix)
        if newest is None:
            return []
        key_column = getattr(model, key)
        recent = model.at_unix >= newest - forget_after_s
        last = (
            select(key_column, func.max(model.at_unix).label("at"))
            .where(recent).group_by(key_column).subquery()
        )
        rows = self.session.scalars(
            select(model)
            .join(last, and_(key_column == last.c[key], model.at_unix == last.c.at))
            .where(recent).order_by(model.id)
        )
        return list({getattr(row, key): row for row in rows}.values())

    def latest_queue_samples(self, *, forget_after_s: float) -> list[QueueReading]:
        """Each queue's newest sample, for queues reported within `forget_after_s` of the newest one."""
        return [to_record(row, QueueReading) for row in self._latest_per(QueueSample, "queue", forget_after_s=forget_after_s)]

    def live_slots(self) -> dict[str, LiveReading]:
        """The manager's live slot counts per queue; none from a manager older than migration
        0008 (no such table: the samples' counts stand)."""
        if not inspect(self.session.connection()).has_table(LiveSlots.__tablename__):
            return {}
        return {row.queue: to_record(row, LiveReading) for row in self.session.scalars(select(LiveSlots))}

    def latest_queue_sample(self, queue: str) -> QueueReading | None:
        row = self.session.scalars(
            select(QueueSample).where(QueueSample.queue == queue)
            .order_by(QueueSample.at_unix.desc(), QueueSample.id.desc()).limit(1)
        ).first()
        return None if row is None else to_record(row, QueueReading)

    def latest_queue_at(self, queue: str) -> float | None:
        value = self.session.scalar(select(func.max(QueueSample.at_unix)).where(QueueSample.queue == queue))
        return None if value is None else float(value)

    def latest_host_samples(self, *, forget_after_s: float) -> list[HostReading]:
        return [to_record(row, HostReading) for row in self._latest_per(HostSample, "host", forget_after_s=forget_after_s)]

    def overrides(self) -> dict[str, Override]:
        return {row.queue: to_record(row, Override) for row in self.session.scalars(select(QueueOverride))}

    def override(self, queue: str) -> Override | None:
        row = self.session.get(QueueOverride, queue)
        return None if row is None else to_record(row, Override)

    def slot_map(self) -> list[SlotMapCell]:
        """The newest plan's slot map: every row stored with the newest `at_unix`."""
        newest = self._latest_at(SlotMapRow.at_unix)
        if newest is None:
            return []
        rows = self.session.scalars(select(SlotMapRow).where(SlotMapRow.at_unix == newest))
        return [SlotMapCell(at_unix=row.at_unix, host=row.host, queue=row.queue, slots=row.slots) for row in rows]

    def queue_buckets(self, queue: str, *, since_unix: float, until_unix: float,
                      bucket_s: float) -> list[QueueBucket]:
        """Samples of `queue` in (since, until], averaged per `bucket_s` (buckets counted from the epoch)."""
        bucket = cast(QueueSample.at_unix / bucket_s, Integer)
        columns = [func.avg(getattr(QueueSample, name)) for name in _BUCKET_FIGURES]
        rows = self.session.execute(
            select(func.max(QueueSample.at_unix), *columns)
            .where(QueueSample.queue == queue, QueueSample.at_unix > since_unix,
                   QueueSample.at_unix <= until_unix)
            .group_by(bucket).order_by(func.max(QueueSample.at_unix))
        )
        return [
            QueueBucket(float(at), *(float(value) for value in values))
            for at, *values in rows
        ]

    def events(self, query: EventQuery) -> tuple[list[StoredEvent], bool]:
        """Newest first (by id), at most `query.limit`; True when older ones match too."""
        stmt = select(Event)
        if query.kind:
            stmt = stmt.where(Event.kind == query.kind)
        if query.queue:
            stmt = stmt.where(Event.queue == query.queue)
        if query.host:
            stmt = stmt.where(Event.host == query.host)
        if query.since_unix is not None:
            stmt = stmt.where(Event.at_unix >= query.since_unix)
        if query.until_unix is not None:
            stmt = stmt.where(Event.at_unix <= query.until_unix)
        if query.before_id is not None:
            stmt = stmt.where(Event.id < query.before_id)
        rows = list(self.session.scalars(stmt.order_by(Event.id.desc()).limit(query.limit + 1)))
        return [to_record(row, StoredEvent) for row in rows[: query.limit]], len(rows) > query.limit

    def event_kinds(self) -> list[str]:
        """Every kind stored, unordered (kinds of a newer manager too)."""
        return list(self.session.scalars(select(Event.kind).distinct()))

    def last_event_at(self, kind: str) -> float | None:
        value = self.session.scalar(select(func.max(Event.at_unix)).where(Event.kind == kind))
        return None if value is None else float(value)

    def newest_ids(self) -> tuple[int, int]:
        """The newest queue sample's id and the newest event's id (0 when there is none)."""
        sample = int(self.session.scalar(select(func.max(QueueSample.id))) or 0)
        event = int(self.session.scalar(select(func.max(Event.id))) or 0)
        return sample, event

    def queue_counts(self, *, after_id: int, since_unix: float | None = None) -> list[QueueCounts]:
        """Per queue, jobs done and errors of the samples past `after_id` (and at or after `since_unix`)."""
        query = (select(QueueSample.queue, func.sum(QueueSample.jobs_done), func.sum(QueueSample.errors),
                        func.max(QueueSample.id))
                 .where(QueueSample.id > after_id).group_by(QueueSample.queue))
        if since_unix is not None:
            query = query.where(QueueSample.at_unix >= since_unix)
        return [QueueCounts(queue=queue, jobs_done=float(done or 0), errors=float(errors or 0), last_id=int(last_id))
                for queue, done, errors, last_id in self.session.execute(query)]

    def crash_details(self, *, after_id: int, since_unix: float | None = None,
                      ) -> list[tuple[int, str | None, Mapping[str, object] | None]]:
        """The slot_crashed events past `after_id` (and at or after `since_unix`): (id, queue,
        detail), oldest first; their detail counts crashes by cause (manager/events/crash_events.py)."""
        query = (select(Event.id, Event.queue, Event.detail)
                 .where(Event.id > after_id, Event.kind == EventKind.SLOT_CRASHED).order_by(Event.id))
        if since_unix is not None:
            query = query.where(Event.at_unix >= since_unix)
        return [(int(row_id), queue, detail) for row_id, queue, detail in self.session.execute(query)]

    def kind_counts(self, *, after_id: int, since_unix: float | None = None) -> list[KindCount]:
        """Per kind, the events past `after_id` (and at or after `since_unix`)."""
        query = (select(Event.kind, func.count(), func.max(Event.id))
                 .where(Event.id > after_id).group_by(Event.kind))
        if since_unix is not None:
            query = query.where(Event.at_unix >= since_unix)
        return [KindCount(kind=kind, count=int(count), last_id=int(last_id))
                for kind, count, last_id in self.session.execute(query)]
