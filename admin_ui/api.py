"""The JSON API (described at /docs) and /metrics; each route is a view or an action call."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from admin_ui import actions, jobs_api, jobs_search_pages, views
from admin_ui.deps import (
    ActorDep,
    EventId,
    ReadsDep,
    SettingsDep,
    StoreDep,
    UnixTime,
    get_store,
    readable,
)
from admin_ui.errors import UnknownQueue
from admin_ui.limiters_shown import queue_limiter, queue_limiters
from admin_ui.metrics import exposition
from admin_ui.queue_metrics import make_queue_registry
from admin_ui.queue_roles import QueueServerRole, read_roles
from admin_ui.schemas import (
    ActionResult,
    EventFilter,
    EventsView,
    Health,
    LimitsChange,
    QueueDetail,
    QueueHistory,
    QueueSortKey,
    QueuesView,
    SlotMapView,
    SortOrder,
)
from config.models import QUEUE_NAME_PATTERN
from manager.storage.store import Store

router = APIRouter(dependencies=[Depends(readable)])
router.include_router(jobs_api.router)
router.include_router(jobs_search_pages.api)
QueueName = Annotated[str, Path(pattern=QUEUE_NAME_PATTERN)]
DAY_S = 86400.0


def client_of(request: Request) -> str | None:
    return request.client.host if request.client else None


@router.get("/api/health", tags=["status"])
def health(reads: ReadsDep, settings: SettingsDep, store: Annotated[Store, Depends(get_store)]) -> Health:
    newest = views.queues_view(reads, now=settings.clock(), forget_after_s=settings.forget_after_s)
    return Health(ok=True, database=store.database,
                  latest_sample_unix=newest.at_unix, read_only=settings.token is None and not settings.role_tokens)


@router.get("/api/queues", tags=["queues"])
def queues(
    reads: ReadsDep, settings: SettingsDep,
    sort: QueueSortKey = "priority", order: SortOrder | None = None,
) -> QueuesView:
    """Every queue's newest sample, sorted by `sort` (numbers biggest first unless `order`);
    a rate-limited queue's row carries its limiter as the pulsar reports it."""
    return views.queues_view(
        reads, now=settings.clock(), forget_after_s=settings.forget_after_s,
        configured=settings.queues, sort=sort, order=order, limiters=queue_limiters(settings),
    )


@router.get("/api/queues/{queue}", tags=["queues"])
def queue(queue: QueueName, reads: ReadsDep, settings: SettingsDep) -> QueueDetail:
    detail = views.queue_detail(reads, queue, now=settings.clock(),
                                config=settings.queues.get(queue), limiter=queue_limiter(settings, queue))
    if detail is None:
        raise UnknownQueue(f"no queue {queue!r} in the config or the manager's samples")
    return detail


@router.get("/api/queues/{queue}/history", tags=["queues"])
def queue_history(
    queue: QueueName, reads: ReadsDep, settings: SettingsDep,
    range_s: Annotated[float, Query(ge=60, le=30 * DAY_S)] = 3600.0,
) -> QueueHistory:
    """Averaged samples over the `range_s` seconds before the queue's newest sample."""
    until = reads.latest_queue_at(queue)
    if until is None:
        raise UnknownQueue(f"no samples of queue {queue!r}")
    return views.queue_history(reads, queue, until_unix=until, range_s=range_s,
                               min_bucket_s=settings.plan_interval_s)


@router.post("/api/queues/{queue}/pause", tags=["actions"])
def pause(queue: QueueName, request: Request, reads: ReadsDep, store: StoreDep,
          settings: SettingsDep, access: ActorDep) -> ActionResult:
    """Ask the manager to take all slots from the queue at its next plan."""
    return actions.set_paused(store, reads, queue, paused=True, now=settings.clock(),
                              config=settings.queues.get(queue), client=client_of(request),
                              actor=access.actor)


@router.post("/api/queues/{queue}/resume", tags=["actions"])
def resume(queue: QueueName, request: Request, reads: ReadsDep, store: StoreDep,
           settings: SettingsDep, access: ActorDep) -> ActionResult:
    return actions.set_paused(store, reads, queue, paused=False, now=settings.clock(),
                              config=settings.queues.get(queue), client=client_of(request),
                              actor=access.actor)


@router.post("/api/queues/{queue}/limiter/resume", tags=["actions"])
def resume_limiter(queue: QueueName, request: Request, reads: ReadsDep, store: StoreDep,
                   settings: SettingsDep, access: ActorDep) -> ActionResult:
    """Lift the pause of the queue's rate limiter at the pulsar, at once."""
    return actions.resume_limiter(store, reads, queue, limiters=settings.limiters, now=settings.clock(),
                                  config=settings.queues.get(queue), client=client_of(request),
                                  actor=access.actor)


@router.put("/api/queues/{queue}/limits", tags=["actions"])
def limits(queue: QueueName, change: LimitsChange, request: Request, reads: ReadsDep, store: StoreDep,
           settings: SettingsDep, access: ActorDep) -> ActionResult:
    """Override min/max slots at runtime; null gives the limit back to the config."""
    return actions.set_limits(store, reads, queue, change, now=settings.clock(),
                              config=settings.queues.get(queue), client=client_of(request),
                              actor=access.actor)


@router.get("/api/slotmap", tags=["hosts"])
def slot_map(reads: ReadsDep, settings: SettingsDep) -> SlotMapView:
    """Slots per host and queue in the newest plan, with each host's memory and counters."""
    order = views.queues_view(reads, now=settings.clock(), forget_after_s=settings.forget_after_s)
    return views.slot_map_view(reads, now=settings.clock(), forget_after_s=settings.forget_after_s,
                               queue_order=[row.queue for row in order.queues])


@router.get("/api/events", tags=["events"])
def events(
    reads: ReadsDep,
    kind: str | None = None, queue: str | None = None, host: str | None = None,
    since_unix: UnixTime | None = None, until_unix: UnixTime | None = None,
    before_id: EventId | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    group: bool = False,
) -> EventsView:
    """Newest first; `before_id` pages back (the response's `older_before_id`). `group`: a run
    of failure events of one queue is one row, its `count` the failures, `grouped` the rows."""
    flt = EventFilter(kind=kind or None, queue=queue or None, host=host or None,
                      since_unix=since_unix, until_unix=until_unix, before_id=before_id, limit=limit,
                      group=group)
    return views.events_view(reads, flt)


@router.get("/api/queue-servers", tags=["status"])
def queue_servers(request: Request) -> list[QueueServerRole]:
    """Each queue server: role, epoch, lease, sync state, and a primary's replicas with
    their lag (ROLE and REPLICAS, read now; docs/DESIGN.md "Failover that loses nothing")."""
    return read_roles(request.app.state.settings)


@router.get("/metrics", tags=["status"], response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus text exposition: the manager's samples, then the queue server's counters."""
    state = request.app.state
    if getattr(state, "queue_registry", None) is None:  # made at the first scrape (create_app builds the database's)
        state.queue_registry = make_queue_registry(state.settings)
    body = exposition(state.registry) + exposition(state.queue_registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
