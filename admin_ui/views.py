"""Queries over the manager's tables turned into view models; pure over a Session (no clock, no config I/O)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, TypeVar

from sqlalchemy import Integer, and_, cast, func, inspect, select
from sqlalchemy.orm import Session

from admin_ui.schemas import (
    EventFilter,
    EventsView,
    EventView,
    HostRow,
    HostSlots,
    LimiterStatus,
    OverrideView,
    QueueConfigView,
    QueueDetail,
    QueueHistory,
    QueuePoint,
    QueueRow,
    QueueSortKey,
    QueuesView,
    QueueTotals,
    SlotMapView,
    SortOrder,
    Trend,
)
from config.models import QueueConfig
from manager.db import Event, HostSample, QueueOverride, QueueSample, SlotMapRow

# The sample tables: one row per queue (host) per report, newest wanted per queue (host).
Sampled = TypeVar("Sampled", QueueSample, HostSample)
TABLES = ("queue_samples", "host_samples", "slot_map", "events", "queue_overrides")
MAX_CHART_POINTS = 240
# Event kinds that come in storms (manager/failures.py): the events page folds runs of them.
GROUPED_KINDS = frozenset({"jobs_failed", "jobs_dead", "dead_jobs_dropped", "queue_server_unreachable"})
QUEUE_EVENTS_SHOWN = 20


def missing_tables(session: Session) -> list[str]:
    """Tables the manager has not created yet (the dashboard shows a notice instead of data)."""
    inspector = inspect(session.connection())
    return [name for name in TABLES if not inspector.has_table(name)]


def trend_of(slots_current: int, slots_desired: int) -> Trend:
    if slots_desired > slots_current:
        return "up"
    if slots_desired < slots_current:
        return "down"
    return "steady"


def default_order(sort: QueueSortKey) -> SortOrder:
    """Names sort A to Z first; numbers biggest first."""
    return "asc" if sort == "queue" else "desc"


def overrides(session: Session) -> dict[str, OverrideView]:
    return {row.queue: _override_view(row) for row in session.scalars(select(QueueOverride))}


def _override_view(row: QueueOverride) -> OverrideView:
    return OverrideView(
        paused=row.paused, min_slots=row.min_slots, max_slots=row.max_slots,
        updated_at_unix=row.updated_at_unix,
    )


def _latest_at(session: Session, column: object) -> float | None:
    value = session.scalar(select(func.max(column)))  # type: ignore[call-overload]
    return None if value is None else float(value)


def _latest_per(
    session: Session, model: type[Sampled], key: str, *, forget_after_s: float
) -> list[Sampled]:
    """Each `key`'s newest row of `model`, for keys reported within `forget_after_s` of the newest row."""
    newest = _latest_at(session, model.at_unix)
    if newest is None:
        return []
    key_column = getattr(model, key)
    recent = model.at_unix >= newest - forget_after_s
    last = (
        select(key_column, func.max(model.at_unix).label("at"))
        .where(recent).group_by(key_column).subquery()
    )
    rows = session.scalars(
        select(model)
        .join(last, and_(key_column == last.c[key], model.at_unix == last.c.at))
        .where(recent).order_by(model.id)
    )
    return list({getattr(row, key): row for row in rows}.values())


def latest_queue_samples(session: Session, *, forget_after_s: float) -> list[QueueSample]:
    """Each queue's newest sample, for queues reported within `forget_after_s` of the newest one."""
    return _latest_per(session, QueueSample, "queue", forget_after_s=forget_after_s)


def queue_row(sample: QueueSample, override: OverrideView | None,
              limiter: LimiterStatus | None = None) -> QueueRow:
    return QueueRow(
        queue=sample.queue, at_unix=sample.at_unix, priority=sample.priority,
        min_slots=sample.min_slots, max_slots=sample.max_slots,
        slots_current=sample.slots_current, slots_avg=sample.slots_avg,
        slots_desired=sample.slots_desired, load=sample.load,
        trend=trend_of(sample.slots_current, sample.slots_desired),
        waiting=sample.waiting, running=sample.running, delayed=sample.delayed,
        jobs_per_s=sample.jobs_per_s, mean_job_s=sample.mean_job_s, errors=sample.errors,
        paused=sample.paused, override=override,
        batch_size=sample.batch_size, batch_size_source=_source(sample.batch_size_source),
        limiter=limiter,
    )


def _source(stored: str | None) -> Literal["config", "handler"] | None:
    """A stored batch_size_source; anything else (a newer manager's word) reads as unknown."""
    if stored == "config":
        return "config"
    if stored == "handler":
        return "handler"
    return None


def sort_queue_rows(rows: Iterable[QueueRow], sort: QueueSortKey, order: SortOrder) -> list[QueueRow]:
    """Sorted by `sort`; ties stay in name order either way (as the page's script does)."""
    by_name = sorted(rows, key=lambda row: row.queue)
    if sort == "queue":
        return by_name if order == "asc" else by_name[::-1]
    return sorted(by_name, key=lambda row: getattr(row, sort), reverse=order == "desc")


def queues_view(
    session: Session, *, now: float, forget_after_s: float, configured: Iterable[str] = (),
    sort: QueueSortKey = "priority", order: SortOrder | None = None,
    limiters: Mapping[str, LimiterStatus] | None = None,
) -> QueuesView:
    """`limiters`: rate-limited queues' limiters (admin_ui/limiters.py), shown with their rows."""
    pending = overrides(session)
    samples = latest_queue_samples(session, forget_after_s=forget_after_s)
    limiters = limiters or {}
    rows = [queue_row(sample, pending.get(sample.queue), limiters.get(sample.queue)) for sample in samples]
    order = order or default_order(sort)
    newest = max((row.at_unix for row in rows), default=None)
    reported = {row.queue for row in rows}
    return QueuesView(
        at_unix=newest,
        age_s=None if newest is None else max(0.0, now - newest),
        sort=sort, order=order,
        queues=sort_queue_rows(rows, sort, order),
        totals=QueueTotals(
            slots_current=sum(row.slots_current for row in rows),
            slots_desired=sum(row.slots_desired for row in rows),
            waiting=sum(row.waiting for row in rows),
            running=sum(row.running for row in rows),
            delayed=sum(row.delayed for row in rows),
            jobs_per_s=sum(row.jobs_per_s for row in rows),
            errors=sum(row.errors for row in rows),
        ),
        unreported=sorted(set(configured) - reported),
    )


def queue_detail(
    session: Session, queue: str, *, now: float, config: QueueConfig | None,
    limiter: LimiterStatus | None = None,
) -> QueueDetail | None:
    """None when the queue is neither configured nor ever reported."""
    last = session.scalars(
        select(QueueSample).where(QueueSample.queue == queue)
        .order_by(QueueSample.at_unix.desc(), QueueSample.id.desc()).limit(1)
    ).first()
    if last is None and config is None:
        return None
    override_row = session.get(QueueOverride, queue)
    override = None if override_row is None else _override_view(override_row)
    slot_map = slot_map_rows(session)
    return QueueDetail(
        queue=queue,
        at_unix=None if last is None else last.at_unix,
        age_s=None if last is None else max(0.0, now - last.at_unix),
        row=None if last is None else queue_row(last, override),
        config=None if config is None else QueueConfigView(
            priority=config.priority, min_slots=config.min_slots, max_slots=config.max_slots,
            batch_size=config.batch_size if "batch_size" in config.model_fields_set else None,
            lock_timeout_s=config.lock_timeout_s,
        ),
        override=override,
        limiter=limiter,
        hosts=[
            HostSlots(host=row.host, slots=row.slots)
            for row in sorted(slot_map, key=lambda row: (-row.slots, row.host))
            if row.queue == queue and row.slots > 0
        ],
        events=find_events(session, EventFilter(queue=queue, limit=QUEUE_EVENTS_SHOWN))[0],
    )


_POINT_COLUMNS = (
    "slots_current", "slots_avg", "slots_desired", "min_slots", "max_slots", "load", "waiting",
    "running", "delayed", "jobs_per_s", "mean_job_s", "errors",
)


def queue_history(
    session: Session, queue: str, *, until_unix: float, range_s: float, min_bucket_s: float,
    max_points: int = MAX_CHART_POINTS,
) -> QueueHistory:
    """Samples of `queue` in (until - range, until], averaged into at most `max_points` buckets."""
    since = until_unix - range_s
    bucket_s = max(min_bucket_s, range_s / max_points)
    bucket = cast(QueueSample.at_unix / bucket_s, Integer)
    columns = [func.avg(getattr(QueueSample, name)) for name in _POINT_COLUMNS]
    rows = session.execute(
        select(func.max(QueueSample.at_unix), *columns)
        .where(QueueSample.queue == queue, QueueSample.at_unix > since,
               QueueSample.at_unix <= until_unix)
        .group_by(bucket).order_by(func.max(QueueSample.at_unix))
    )
    points = [
        QueuePoint(at_unix=float(at), **{
            name: float(value) for name, value in zip(_POINT_COLUMNS, values, strict=True)
        })
        for at, *values in rows
    ]
    return QueueHistory(queue=queue, since_unix=since, until_unix=until_unix, bucket_s=bucket_s,
                        points=points)


def latest_queue_at(session: Session, queue: str) -> float | None:
    value = session.scalar(select(func.max(QueueSample.at_unix)).where(QueueSample.queue == queue))
    return None if value is None else float(value)


def slot_map_rows(session: Session) -> list[SlotMapRow]:
    """The newest plan's slot map: every row stored with the newest `at_unix`."""
    newest = _latest_at(session, SlotMapRow.at_unix)
    if newest is None:
        return []
    return list(session.scalars(select(SlotMapRow).where(SlotMapRow.at_unix == newest)))


def latest_host_samples(session: Session, *, forget_after_s: float) -> list[HostSample]:
    return _latest_per(session, HostSample, "host", forget_after_s=forget_after_s)


def slot_map_view(
    session: Session, *, now: float, forget_after_s: float, queue_order: Sequence[str] = (),
) -> SlotMapView:
    """Hosts x queues; queues in `queue_order` first (the queues page's order), then by name."""
    mapped = slot_map_rows(session)
    samples = {row.host: row for row in latest_host_samples(session, forget_after_s=forget_after_s)}
    by_host: dict[str, dict[str, int]] = {}
    for row in mapped:
        if row.slots > 0:
            cells = by_host.setdefault(row.host, {})
            cells[row.queue] = cells.get(row.queue, 0) + row.slots
    queue_totals: dict[str, int] = {}
    for cells in by_host.values():
        for queue, slots in cells.items():
            queue_totals[queue] = queue_totals.get(queue, 0) + slots
    rank = {name: index for index, name in enumerate(queue_order)}
    queues = sorted(queue_totals, key=lambda name: (rank.get(name, len(rank)), name))
    hosts = [
        _host_row(name, samples.get(name), by_host.get(name, {}))
        for name in sorted(set(samples) | set(by_host))
    ]
    at = mapped[0].at_unix if mapped else None
    return SlotMapView(
        at_unix=at, age_s=None if at is None else max(0.0, now - at), queues=queues, hosts=hosts,
        queue_totals=queue_totals, total=sum(queue_totals.values()),
    )


def _host_row(host: str, sample: HostSample | None, cells: Mapping[str, int]) -> HostRow:
    if sample is None:
        return HostRow(
            host=host, at_unix=None, alive=False, reported=False, capacity=0, slots=0,
            mem_total_bytes=None, mem_available_bytes=0, master_pss_bytes=0, slots_pss_bytes=0,
            avg_slot_bytes=0, load_avg_1m=0.0, recycled_for_memory=0, killed_hung=0,
            by_queue=dict(cells), mapped=sum(cells.values()),
        )
    return HostRow(
        host=host, at_unix=sample.at_unix, alive=sample.alive, reported=True,
        capacity=sample.capacity, slots=sample.slots, mem_total_bytes=sample.mem_total_bytes or None,
        mem_available_bytes=sample.mem_available_bytes, master_pss_bytes=sample.master_pss_bytes,
        slots_pss_bytes=sample.slots_pss_bytes, avg_slot_bytes=sample.avg_slot_bytes,
        load_avg_1m=sample.load_avg_1m, recycled_for_memory=sample.recycled_for_memory,
        killed_hung=sample.killed_hung, by_queue=dict(cells), mapped=sum(cells.values()),
    )


def event_view(row: Event) -> EventView:
    return EventView(
        id=row.id, at_unix=row.at_unix, kind=row.kind, queue=row.queue, host=row.host,
        actor=row.actor, message=row.message, detail=row.detail,
    )


def find_events(session: Session, flt: EventFilter) -> tuple[list[EventView], bool]:
    """Newest first (by id), at most `flt.limit`; True when older ones match too."""
    stmt = select(Event)
    if flt.kind:
        stmt = stmt.where(Event.kind == flt.kind)
    if flt.queue:
        stmt = stmt.where(Event.queue == flt.queue)
    if flt.host:
        stmt = stmt.where(Event.host == flt.host)
    if flt.since_unix is not None:
        stmt = stmt.where(Event.at_unix >= flt.since_unix)
    if flt.until_unix is not None:
        stmt = stmt.where(Event.at_unix <= flt.until_unix)
    if flt.before_id is not None:
        stmt = stmt.where(Event.id < flt.before_id)
    rows = list(session.scalars(stmt.order_by(Event.id.desc()).limit(flt.limit + 1)))
    return [event_view(row) for row in rows[: flt.limit]], len(rows) > flt.limit


def _count_of(event: EventView) -> int:
    value = (event.detail or {}).get("count")
    return value if isinstance(value, int) and value > 0 else 1


def group_failures(events: Sequence[EventView]) -> list[EventView]:
    """Newest first in, newest first out: a run of failure events of one queue (kind, queue,
    host and actor the same, nothing else between) becomes one row with their summed count."""
    rows: list[EventView] = []
    for event in events:
        last = rows[-1] if rows else None
        if (last is not None and event.kind in GROUPED_KINDS
                and (last.kind, last.queue, last.host, last.actor) == (event.kind, event.queue, event.host, event.actor)):
            rows[-1] = last.model_copy(update={
                "count": last.count + _count_of(event), "grouped": last.grouped + 1,
                "first_at_unix": event.at_unix,
            })
        else:
            rows.append(event.model_copy(update={"count": _count_of(event), "first_at_unix": event.at_unix}))
    return rows


def events_view(
    session: Session, flt: EventFilter, *, queues: Iterable[str] = (), hosts: Iterable[str] = (),
) -> EventsView:
    """Events matching `flt` (failure runs grouped with `flt.group`); `queues` and `hosts` are
    offered as filter choices."""
    events, more = find_events(session, flt)
    oldest_id = events[-1].id if events else None
    if flt.group:
        events = group_failures(events)
    kinds = sorted(session.scalars(select(Event.kind).distinct()))
    return EventsView(
        filter=flt, events=events, kinds=kinds, queues=sorted(set(queues)), hosts=sorted(set(hosts)),
        older_before_id=oldest_id if more else None,
    )
