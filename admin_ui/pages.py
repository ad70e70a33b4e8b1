"""Server-rendered pages (they work without JavaScript) and the HTML forms of the admin actions."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Path, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from admin_ui import actions, jobs, jobs_pages, jobs_search_pages, views
from admin_ui.auth import SESSION_COOKIE, Access, role_of_token, session_value
from admin_ui.charts import QUEUE_CHARTS, queue_chart
from admin_ui.deps import (
    ActorDep,
    EventId,
    FormDep,
    ReadsDep,
    SettingsDep,
    StoreDep,
    get_access,
    readable,
)
from admin_ui.errors import LOGIN_REASONS, AdminError, InvalidLimits, UnknownQueue
from admin_ui.limiters_shown import queue_limiter, queue_limiters
from admin_ui.queue_roles import read_roles
from admin_ui.schemas import EventFilter, LimitsChange, QueueSortKey, SortOrder
from admin_ui.settings import AdminSettings
from config.models import QUEUE_NAME_PATTERN

router = APIRouter(dependencies=[Depends(readable)], include_in_schema=False)
router.include_router(jobs_pages.router)
router.include_router(jobs_search_pages.pages)
QueueName = Annotated[str, Path(pattern=QUEUE_NAME_PATTERN)]
RangeName = Literal["15m", "1h", "6h", "24h", "7d"]
RANGES_S: dict[str, float] = {"15m": 900, "1h": 3600, "6h": 6 * 3600, "24h": 86400, "7d": 7 * 86400}


# The Queues page refreshes at least this often: its slot counts are the manager's live
# ones (rewritten every 0.5 s), and an admin watching a burst sees them within a second.
LIVE_REFRESH_S = 0.5


def render(request: Request, template: str, access: Access, settings: AdminSettings,
           *, refresh_s: float | None = None, **context: object) -> HTMLResponse:
    every_s = settings.refresh_s if refresh_s is None else refresh_s
    return request.app.state.templates.TemplateResponse(  # type: ignore[no-any-return]
        request, template,
        {"access": access, "refresh_ms": int(every_s * 1000), "now": settings.clock(),
         **context},
    )


@router.get("/")
def home() -> RedirectResponse:
    return RedirectResponse("/queues", status_code=303)


@router.get("/queues")
def queues_page(
    request: Request, reads: ReadsDep, settings: SettingsDep, access: Annotated[Access, Depends(readable)],
    sort: QueueSortKey = "priority", order: SortOrder | None = None,
) -> HTMLResponse:
    view = views.queues_view(reads, now=settings.clock(), forget_after_s=settings.forget_after_s,
                             configured=settings.queues, sort=sort, order=order,
                             limiters=queue_limiters(settings))
    # Never faster for an admin who turned refreshing off (refresh_s 0).
    live_s = min(settings.refresh_s, LIVE_REFRESH_S) if settings.refresh_s > 0 else 0.0
    servers = read_roles(settings) if len(settings.queue_servers) > 1 else []
    return render(request, "queues.html", access, settings, refresh_s=live_s, view=view, nav="queues",
                  default_order=views.default_order, queue_servers=servers)


@router.get("/queues/{queue}")
def queue_page(
    queue: QueueName, request: Request, reads: ReadsDep, settings: SettingsDep,
    access: Annotated[Access, Depends(readable)], range: RangeName = "1h",
) -> HTMLResponse:
    detail = views.queue_detail(reads, queue, now=settings.clock(),
                                config=settings.queues.get(queue), limiter=queue_limiter(settings, queue))
    if detail is None:
        raise UnknownQueue(f"no queue {queue!r} in the config or the manager's samples")
    return render(request, "queue.html", access, settings, detail=detail, nav="queues",
                  charts=list(QUEUE_CHARTS), range=range, ranges=list(RANGES_S),
                  job_counts=jobs.job_counts(settings, queue))


@router.get("/queues/{queue}/charts/{chart}.svg")
def queue_chart_svg(
    queue: QueueName, chart: str, reads: ReadsDep, settings: SettingsDep,
    range: RangeName = "1h",
) -> Response:
    if chart not in QUEUE_CHARTS:
        raise UnknownQueue(f"no chart {chart!r}; charts: {', '.join(QUEUE_CHARTS)}")
    until = reads.latest_queue_at(queue) or settings.clock()
    history = views.queue_history(reads, queue, until_unix=until, range_s=RANGES_S[range],
                                  min_bucket_s=settings.plan_interval_s)
    svg = queue_chart(history, chart, target_load=settings.target_load)
    return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "no-store"})


def _limit_field(fields: dict[str, str], name: str) -> int | None:
    raw = fields.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise InvalidLimits(f"{name} must be a whole number >= 0, got {raw!r}")
    return int(raw)


@router.post("/queues/{queue}/{action}")
def queue_action(
    queue: QueueName, action: Literal["pause", "resume", "limits", "resume-limiter"], request: Request,
    reads: ReadsDep, store: StoreDep, settings: SettingsDep, fields: FormDep, access: ActorDep,
) -> RedirectResponse:
    client = request.client.host if request.client else None
    config = settings.queues.get(queue)
    if action == "limits":
        change = LimitsChange(min_slots=_limit_field(fields, "min_slots"),
                              max_slots=_limit_field(fields, "max_slots"))
        actions.set_limits(store, reads, queue, change, now=settings.clock(), config=config, client=client,
                           actor=access.actor)
    elif action == "resume-limiter":
        actions.resume_limiter(store, reads, queue, limiters=settings.limiters, now=settings.clock(),
                               config=config, client=client, actor=access.actor)
    else:
        actions.set_paused(store, reads, queue, paused=action == "pause", now=settings.clock(),
                           config=config, client=client, actor=access.actor)
    return RedirectResponse(f"/queues/{queue}", status_code=303)


@router.get("/slotmap")
def slot_map_page(
    request: Request, reads: ReadsDep, settings: SettingsDep,
    access: Annotated[Access, Depends(readable)],
) -> HTMLResponse:
    now = settings.clock()
    order = views.queues_view(reads, now=now, forget_after_s=settings.forget_after_s)
    view = views.slot_map_view(reads, now=now, forget_after_s=settings.forget_after_s,
                               queue_order=[row.queue for row in order.queues])
    # With two or more queue servers, each one's role (ROLE and REPLICAS, read now).
    servers = read_roles(settings) if len(settings.queue_servers) > 1 else []
    return render(request, "slotmap.html", access, settings, view=view, nav="slotmap",
                  queue_servers=servers)


def _parse_utc(name: str, raw: str | None) -> float | None:
    """A datetime-local field (YYYY-MM-DDTHH:MM[:SS]) read as UTC."""
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise AdminError(f"{name}: expected YYYY-MM-DDTHH:MM (UTC), got {raw!r}") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


@router.get("/events")
def events_page(
    request: Request, reads: ReadsDep, settings: SettingsDep,
    access: Annotated[Access, Depends(readable)],
    kind: str | None = None, queue: str | None = None, host: str | None = None,
    since: str | None = None, until: str | None = None, before_id: EventId | None = None,
) -> HTMLResponse:
    flt = EventFilter(kind=kind or None, queue=queue or None, host=host or None,
                      since_unix=_parse_utc("since", since), until_unix=_parse_utc("until", until),
                      before_id=before_id, group=True)
    now = settings.clock()
    queue_names = [row.queue for row in views.queues_view(
        reads, now=now, forget_after_s=settings.forget_after_s).queues]
    host_names = [row.host for row in views.slot_map_view(
        reads, now=now, forget_after_s=settings.forget_after_s).hosts]
    view = views.events_view(reads, flt, queues=[*queue_names, *settings.queues], hosts=host_names)
    api_query = {"kind": flt.kind, "queue": flt.queue, "host": flt.host, "since_unix": flt.since_unix,
                 "until_unix": flt.until_unix, "before_id": flt.before_id, "group": "true"}
    page_query = {"kind": flt.kind, "queue": flt.queue, "host": flt.host, "since": since, "until": until,
                  "before_id": view.older_before_id}
    return render(request, "events.html", access, settings, view=view, nav="events",
                  since=since or "", until=until or "", api_url=f"/api/events?{_query(api_query)}",
                  older_url=f"/events?{_query(page_query)}")


def _query(fields: Mapping[str, object]) -> str:
    return urlencode({name: value for name, value in fields.items() if value not in (None, "")})


public = APIRouter(include_in_schema=False)


def _local_path(target: str | None) -> str:
    """Only redirect within this site after login."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/queues"


@public.get("/login")
def login_page(request: Request, settings: SettingsDep, access: Annotated[Access, Depends(get_access)],
               next: str | None = None, why: str = "") -> HTMLResponse:
    return render(request, "login.html", access, settings, nav="login", next=_local_path(next), error=None,
                  why=why if why in LOGIN_REASONS else "", reasons=LOGIN_REASONS)


@public.post("/login")
def login(request: Request, settings: SettingsDep, access: Annotated[Access, Depends(get_access)],
          fields: FormDep) -> Response:
    target = _local_path(fields.get("next"))
    found = role_of_token(fields.get("token", ""), settings)
    if found is None:
        why = fields.get("why", "")
        response = render(request, "login.html", access, settings, nav="login", next=target,
                          error="wrong token" if access.token_configured else "no admin token is configured",
                          why=why if why in LOGIN_REASONS else "", reasons=LOGIN_REASONS)
        response.status_code = 401
        return response
    redirect = RedirectResponse(target, status_code=303)
    redirect.set_cookie(SESSION_COOKIE, session_value(found[1]), httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")
    return redirect


@public.post("/logout")
def logout(_: FormDep) -> RedirectResponse:
    redirect = RedirectResponse("/queues", status_code=303)
    redirect.delete_cookie(SESSION_COOKIE, path="/")
    return redirect
