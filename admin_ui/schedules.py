"""The Schedules page and `/api/schedules`: each periodic job's next and last fire, and an admin's
pause, resume and "run now" (through manager/schedules/admin.py, an event naming the door)."""
from __future__ import annotations

import logging
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from admin_ui.deps import ActorDep, ReadableDep, SettingsDep, StoreDep, readable
from admin_ui.errors import AdminError, UnknownQueue
from admin_ui.queue_link import queue_client
from admin_ui.schemas import ScheduleAction, ScheduleView
from admin_ui.settings import AdminSettings
from config.periodic import TurnBoundary
from config.schedules import SCHEDULE_NAME_PATTERN
from manager.schedules.admin import Door, UnknownSchedule, act
from manager.schedules.state import ScheduleStates
from manager.schedules.view import schedule_rows
from manager.storage.store import Store
from queue_server.protocol.client_errors import QueueServerError

api = APIRouter(dependencies=[Depends(readable)])
pages = APIRouter(dependencies=[Depends(readable)], include_in_schema=False)
ScheduleName = Annotated[str, Path(pattern=SCHEDULE_NAME_PATTERN)]
Action = Literal["pause", "resume", "run"]
log = logging.getLogger("slotmap.admin")
# Every open Schedules page asks at each refresh: an outage is said once, with its reason.
_JOB_STATES = TurnBoundary("reading the schedules' last jobs from the queue server", log=log, traceback=False,
                           next_turn='their states show as "unknown" until it answers')


def schedule_views(settings: AdminSettings, store: Store) -> list[ScheduleView]:
    """Every schedule; the last job's state from the queue server ("unknown" when it is away)."""
    states = ScheduleStates(store.engine).all()
    try:
        with queue_client(settings) as client:
            def job_state(key: str) -> str:
                info = client.job(key)
                return "done" if info is None else str(info.state)

            rows = schedule_rows(settings.current_schedules(), states, now_unix=settings.clock(), job_state=job_state)
    except (AdminError, QueueServerError, OSError):
        _JOB_STATES.failed()
        rows = schedule_rows(settings.current_schedules(), states, now_unix=settings.clock(),
                             job_state=lambda key: "unknown")
    else:
        _JOB_STATES.succeeded()
    return [ScheduleView.model_validate(row, from_attributes=True) for row in rows]


def _act(settings: AdminSettings, store: Store, name: str, action: Action, door: Door,
         request: Request, actor: str) -> str:
    client = request.client.host if request.client else None
    try:
        return act(store, settings.current_schedules(), name, action, door=door, now_unix=settings.clock(),
                   client=client, actor=actor)
    except UnknownSchedule as exc:
        raise UnknownQueue(str(exc)) from None


@api.get("/api/schedules", tags=["schedules"])
def list_schedules(settings: SettingsDep, store: StoreDep) -> list[ScheduleView]:
    """Each schedule: rule, next fire, the last fired job's key and state, paused or not."""
    return schedule_views(settings, store)


@api.post("/api/schedules/{name}/{action}", tags=["schedules"])
def schedule_action(name: ScheduleName, action: Action, request: Request, settings: SettingsDep,
                    store: StoreDep, access: ActorDep) -> ScheduleAction:
    """pause, resume, or run (a job now, keyed `<name>@manual-<time>`): the active manager acts
    within a quarter second."""
    return ScheduleAction(schedule=name, message=_act(settings, store, name, action, "api", request,
                                                                 access.actor))


@pages.get("/schedules")
def schedules_page(request: Request, settings: SettingsDep, store: StoreDep,
                   access: ReadableDep) -> HTMLResponse:
    return request.app.state.templates.TemplateResponse(  # type: ignore[no-any-return]
        request, "schedules.html",
        {"access": access, "refresh_ms": int(settings.refresh_s * 1000), "now": settings.clock(),
         "nav": "schedules", "schedules": schedule_views(settings, store)},
    )


@pages.post("/schedules/{name}/{action}")
def schedule_form(name: ScheduleName, action: Action, request: Request, settings: SettingsDep,
                  store: StoreDep, access: ActorDep) -> RedirectResponse:
    _act(settings, store, name, action, "dashboard", request, access.actor)
    return RedirectResponse("/schedules", status_code=303)
