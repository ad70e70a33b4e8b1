"""The manager's stored history (manager/storage/store_reads.py) turned into view models; no clock, no config I/O."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Literal

from admin_ui.errors import InvalidTimeRange
from admin_ui.format import fmt
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
from admin_ui.start_failures import start_failure_views
from config.models import QueueConfig
from manager.events.code_versions import other_code
from manager.storage.store import EventKind, Override
from manager.storage.store_reads import (
    EventQuery,
    HostReading,
    LiveReading,
    QueueReading,
    StoredEvent,
    StoreReads,
)

MAX_CHART_POINTS = 240
# Event kinds that come in storms (manager/events/failures.py): the events page folds runs of them.
GROUPED_KINDS = frozenset({EventKind.JOBS_FAILED, EventKind.JOBS_DEAD, EventKind.DEAD_JOBS_DROPPED,
                           EventKind.QUEUE_SERVER_UNREACHABLE, EventKind.PEER_REFUSED})
# The failure events whose row links to the queue's jobs in that state.
JOBS_STATE_OF_KIND = {EventKind.JOBS_FAILED: "failed", EventKind.JOBS_DEAD: "dead",
                      EventKind.DEAD_JOBS_DROPPED: "dead"}
QUEUE_EVENTS_SHOWN = 20
# Live counts older than this are the last words of a manager that stopped writing them (it
# rewrites them every 0.5 s): the samples' counts stand, with their own age.
LIVE_STALE_S = 10.0


def trend_of(slots_current: int, slots_desired: int) -> Trend:
    if slots_desired > slots_current:
        return "up"
    if slots_desired < slots_current:
        return "down"
    return "steady"


def default_order(sort: QueueSortKey) -> SortOrder:
    """Names sort A to Z first; numbers biggest first."""
    return "asc" if sort == "queue" else "desc"


def override_view(override: Override) -> OverrideView:
    return OverrideView(
        paused=override.paused, min_slots=override.min_slots, max_slots=override.max_slots,
        updated_at_unix=override.updated_at_unix,
    )


def delayed_only(delayed: int, failed: int) -> int:
    """The queue server counts failed jobs (waiting for their retry) among the delayed ones; the
    dashboard's Delayed count leaves them to Failed, so it is as many as its Delayed list shows."""
    return max(0, delayed - failed)


def queue_row(sample: QueueReading, override: OverrideView | None,
              limiter: LimiterStatus | None = None) -> QueueRow:
    row = _queue_row(sample, override, limiter)
    return row.model_copy(update={"unhandled": True}) if is_unhandled(row) else row


def _queue_row(sample: QueueReading, override: OverrideView | None,
               limiter: LimiterStatus | None) -> QueueRow:
    return QueueRow(
        queue=sample.queue, at_unix=sample.at_unix, priority=sample.priority,
        min_slots=sample.min_slots, max_slots=sample.max_slots,
        slots_current=sample.slots_current, slots_avg=sample.slots_avg,
        slots_desired=sample.slots_desired, load=sample.load,
        trend=trend_of(sample.slots_current, sample.slots_desired),
        waiting=sample.waiting, running=sample.running,
        delayed=delayed_only(sample.delayed, sample.failed or 0),
        jobs_per_s=sample.jobs_per_s, mean_job_s=sample.mean_job_s, errors=sample.errors,
        failed=sample.failed or 0, dead=sample.dead or 0,
        configured=sample.configured is not False, handled=sample.handled,
        paused=sample.paused, override=override,
        batch_size=sample.batch_size, batch_size_source=_source(sample.batch_size_source),
        limiter=limiter,
    )


def with_live(row: QueueRow, live: LiveReading | None, *, now: float) -> QueueRow:
    """The row with the manager's live slot count when it is fresh (issue 28: the samples'
    count trailed a burst by a plan interval), and the count's age either way."""
    if live is None or now - live.at_unix > LIVE_STALE_S:
        return row.model_copy(update={"slots_age_s": max(0.0, now - row.at_unix)})
    return row.model_copy(update={
        "slots_current": live.running, "slots_live": True,
        "slots_age_s": max(0.0, now - live.at_unix) + live.reports_age_s,
        # Up while the map gives the queue more than runs (slots starting), down while fewer.
        "trend": trend_of(live.running, live.assigned),
    })


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
    reads: StoreReads, *, now: float, forget_after_s: float, configured: Iterable[str] = (),
    sort: QueueSortKey = "priority", order: SortOrder | None = None,
    limiters: Mapping[str, LimiterStatus] | None = None,
) -> QueuesView:
    """`limiters`: rate-limited queues' limiters (admin_ui/limiters.py), shown with their rows."""
    pending = {queue: override_view(override) for queue, override in reads.overrides().items()}
    samples = reads.latest_queue_samples(forget_after_s=forget_after_s)
    limiters = limiters or {}
    live = reads.live_slots()
    rows = [with_live(queue_row(sample, pending.get(sample.queue), limiters.get(sample.queue)),
                      live.get(sample.queue), now=now) for sample in samples]
    order = order or default_order(sort)
    newest = max((row.at_unix for row in rows), default=None)
    reported = {row.queue for row in rows}
    return QueuesView(
        at_unix=newest,
        age_s=None if newest is None else max(0.0, now - newest),
        slots_age_s=max((row.slots_age_s for row in rows if row.slots_age_s is not None), default=None),
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
            failed=sum(row.failed for row in rows),
            dead=sum(row.dead for row in rows),
        ),
        unreported=sorted(set(configured) - reported),
        unhandled=sorted(row.queue for row in rows if row.unhandled),
    )


def is_unhandled(row: QueueRow) -> bool:
    """Jobs wait (or died) that no slot can take: no config names the queue, or no live
    master has its handler."""
    holds = row.waiting + row.delayed + row.running + row.dead > 0
    return holds and (not row.configured or row.handled is False)


def queue_detail(
    reads: StoreReads, queue: str, *, now: float, config: QueueConfig | None,
    limiter: LimiterStatus | None = None,
) -> QueueDetail | None:
    """None when the queue is neither configured nor ever reported."""
    last = reads.latest_queue_sample(queue)
    if last is None and config is None:
        return None
    stored = reads.override(queue)
    override = None if stored is None else override_view(stored)
    slot_map = reads.slot_map()
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
        events=find_events(reads, EventFilter(queue=queue, limit=QUEUE_EVENTS_SHOWN))[0],
    )


def queue_history(
    reads: StoreReads, queue: str, *, until_unix: float, range_s: float, min_bucket_s: float,
    max_points: int = MAX_CHART_POINTS,
) -> QueueHistory:
    """Samples of `queue` in (until - range, until], averaged into at most `max_points` buckets."""
    since = until_unix - range_s
    bucket_s = max(min_bucket_s, range_s / max_points)
    buckets = reads.queue_buckets(queue, since_unix=since, until_unix=until_unix, bucket_s=bucket_s)
    points = [QueuePoint(**asdict(bucket)) for bucket in buckets]
    return QueueHistory(queue=queue, since_unix=since, until_unix=until_unix, bucket_s=bucket_s,
                        points=points)


def slot_map_view(
    reads: StoreReads, *, now: float, forget_after_s: float, queue_order: Sequence[str] = (),
) -> SlotMapView:
    """Hosts x queues; queues in `queue_order` first (the queues page's order), then by name."""
    mapped = reads.slot_map()
    samples = {row.host: row for row in reads.latest_host_samples(forget_after_s=forget_after_s)}
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
    hosts = mark_other_code([
        _host_row(name, samples.get(name), by_host.get(name, {}))
        for name in sorted(set(samples) | set(by_host))
    ])
    at = mapped[0].at_unix if mapped else None
    return SlotMapView(
        at_unix=at, age_s=None if at is None else max(0.0, now - at), queues=queues, hosts=hosts,
        queue_totals=queue_totals, total=sum(queue_totals.values()),
    )


def mark_other_code(rows: list[HostRow]) -> list[HostRow]:
    """Mark the live hosts whose code version differs from the one most live hosts run (a
    rolling deploy under way, or a host left behind); the older wins a tie, by name order."""
    other = other_code((row.host, row.alive, row.code_version) for row in rows)
    return [row.model_copy(update={"other_code": True}) if row.host in other else row for row in rows]


def _host_row(host: str, sample: HostReading | None, cells: Mapping[str, int]) -> HostRow:
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
        recycled_for_jobs=sample.recycled_for_jobs, recycled_for_age=sample.recycled_for_age,
        killed_hung=sample.killed_hung, load_cap=sample.load_cap, by_queue=dict(cells),
        mapped=sum(cells.values()), code_version=sample.code_version,
        code_reload_failure=sample.code_reload_failure,
        start_failures=start_failure_views(sample.start_failures) if sample.alive else [],
    )


def event_view(row: StoredEvent) -> EventView:
    return EventView(
        id=row.id, at_unix=row.at_unix, kind=row.kind, queue=row.queue, host=row.host,
        actor=row.actor, message=row.message, detail=row.detail,
    )


def find_events(reads: StoreReads, flt: EventFilter) -> tuple[list[EventView], bool]:
    """Newest first (by id), at most `flt.limit`; True when older ones match too."""
    events, more = reads.events(EventQuery(
        kind=flt.kind, queue=flt.queue, host=flt.host, since_unix=flt.since_unix,
        until_unix=flt.until_unix, before_id=flt.before_id, limit=flt.limit,
    ))
    return [event_view(event) for event in events], more


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
    reads: StoreReads, flt: EventFilter, *, queues: Iterable[str] = (), hosts: Iterable[str] = (),
) -> EventsView:
    """Events matching `flt` (failure runs grouped with `flt.group`); `queues` and `hosts` are
    offered as filter choices."""
    if flt.since_unix is not None and flt.until_unix is not None and flt.since_unix > flt.until_unix:
        raise InvalidTimeRange(f"since ({fmt(flt.since_unix, 'time')} UTC) is after until "
                               f"({fmt(flt.until_unix, 'time')} UTC): nothing can match; swap them")
    events, more = find_events(reads, flt)
    oldest_id = events[-1].id if events else None
    if flt.group:
        events = group_failures(events)
    kinds = sorted(reads.event_kinds())
    return EventsView(
        filter=flt, events=events, kinds=kinds, queues=sorted(set(queues)), hosts=sorted(set(hosts)),
        older_before_id=oldest_id if more else None,
    )
