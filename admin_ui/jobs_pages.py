"""The jobs pages: a queue's jobs by state (Failed, Dead, ...), one job by key, and the retry/delete forms.

Included by pages.py's router (same read rule). The forms work without JavaScript: each row's
buttons name their one job, "selected" sends the ticked boxes, "all" a whole state.
"""
from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError

from admin_ui import jobs
from admin_ui.auth import Access
from admin_ui.deps import ActorDep, FormDep, SettingsDep, StoreDep, same_site
from admin_ui.errors import InvalidJobsAction
from admin_ui.job_cancel import cancel_job
from admin_ui.jobs_access import JobsReaderDep
from admin_ui.schemas import JOB_KEY_PATTERN, JOB_STATES, JobsAction, JobState
from admin_ui.settings import AdminSettings
from config.models import QUEUE_NAME_PATTERN
from queue_server.protocol.job_positions import POSITION_PATTERN

router = APIRouter(include_in_schema=False)
QueueName = Annotated[str, Path(pattern=QUEUE_NAME_PATTERN)]
JobKey = Annotated[str, Path(pattern=JOB_KEY_PATTERN)]
PAGE_SIZE = 100
# 1,000 ticked keys of up to 128 characters, URL-encoded.
MAX_JOBS_FORM_BYTES = 256 * 1024
PREVIEW_CHARS = 120


def render(request: Request, template: str, access: Access, settings: AdminSettings,
           **context: object) -> HTMLResponse:
    # No live refresh here: a refresh would re-render the table under the admin's ticked boxes.
    return request.app.state.templates.TemplateResponse(  # type: ignore[no-any-return]
        request, template,
        {"access": access, "refresh_ms": 0, "now": settings.clock(), "preview_chars": PREVIEW_CHARS,
         **context},
    )


@router.get("/queues/{queue}/jobs")
def jobs_page(
    queue: QueueName, request: Request, settings: SettingsDep,
    access: JobsReaderDep, state: JobState = "failed",
    after: Annotated[str | None, Query(pattern=JOB_KEY_PATTERN)] = None,
    at: Annotated[str | None, Query(pattern=POSITION_PATTERN)] = None,
    retried: int | None = None, deleted: int | None = None,
    cancelled: Annotated[str | None, Query(pattern=JOB_KEY_PATTERN)] = None,
) -> HTMLResponse:
    view = jobs.list_jobs(settings, queue, state, limit=PAGE_SIZE, after=after, at=at)
    notice = None
    if retried is not None:
        notice = f"{retried} job{'s' if retried != 1 else ''} retried"
    elif deleted is not None:
        notice = f"{deleted} job{'s' if deleted != 1 else ''} deleted"
    elif cancelled is not None:
        notice = f"job {cancelled} cancelled: it was waiting, so it is removed"
    return render(request, "jobs.html", access, settings, view=view, states=JOB_STATES, nav="queues",
                  notice=notice, after=after)


def find_job_page(key: str) -> RedirectResponse:
    """The header's search box (`/jobs?key=K`, jobs_search_pages.py): straight to the job's page."""
    key = key.strip()
    if not key:
        raise InvalidJobsAction("give a job key")
    if not _is_key(key):
        raise InvalidJobsAction(f"{key!r} is not a job key (letters, digits, _ . : -, up to 128)")
    return RedirectResponse(f"/jobs/{key}", status_code=303)


@router.get("/jobs/{key}")
def job_page(key: JobKey, request: Request, settings: SettingsDep, access: JobsReaderDep) -> HTMLResponse:
    view = jobs.find_job(settings, key)
    return render(request, "job.html", access, settings, job=view, nav="queues")


async def jobs_form(request: Request) -> dict[str, list[str]]:
    """The form's fields with every value (ticked boxes repeat `key`)."""
    same_site(request)
    body = await request.body()
    if len(body) > MAX_JOBS_FORM_BYTES:
        raise InvalidJobsAction(f"form over {MAX_JOBS_FORM_BYTES} bytes: tick fewer jobs, or use all")
    return parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=False)


def form_action(fields: dict[str, list[str]]) -> JobsAction:
    """`one` (a row's button) wins over the ticked `key`s; `all` names a state."""
    one = fields.get("one", [])
    keys = one[:1] if one else fields.get("key", [])
    all_state = fields["all"][0] if fields.get("all") else None
    try:
        return JobsAction(keys=keys if all_state is None else [], all=all_state)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidJobsAction(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


@router.post("/queues/{queue}/jobs/{action}", response_model=None)
def jobs_action(
    queue: QueueName, action: Literal["retry", "delete"], request: Request, store: StoreDep,
    settings: SettingsDep, fields: Annotated[dict[str, list[str]], Depends(jobs_form)], access: ActorDep,
) -> RedirectResponse | HTMLResponse:
    change = form_action(fields)
    now_count = _count_now(settings, queue, change)
    seen = (fields.get("seen") or [""])[0]
    # "Delete all 12" confirmed on a page shown a while ago: more may have died since. Asked
    # again with the count of now, an operator never changes jobs the question did not count.
    moved = now_count is not None and seen != "" and seen != str(now_count)
    # One job's Retry goes at once (it only runs again); a delete cannot be undone, so one
    # job's Delete is asked like the bulk actions (app.js asks, else the confirmation page).
    asked = fields.get("confirm") == ["yes"] or (bool(fields.get("one")) and action == "retry")
    if not asked or moved:
        return confirm_page(request, access, settings, fields, queue, action, change,
                            now_count=now_count, seen=seen if moved else "")
    result = jobs.change_jobs(settings, store, queue, change, action, now=settings.clock(), door="dashboard",
                              client_host=request.client.host if request.client else None, actor=access.actor)
    state = (fields.get("state") or ["failed"])[0]
    back = (fields.get("next") or [""])[0]
    if back.startswith("/jobs/") and _is_key(back[len("/jobs/"):]) and action == "retry":
        return RedirectResponse(back, status_code=303)
    query = {"state": state if state in JOB_STATES else "failed",
             "retried" if action == "retry" else "deleted": result.count}
    return RedirectResponse(f"/queues/{queue}/jobs?{urlencode(query)}", status_code=303)


def _count_now(settings: AdminSettings, queue: str, change: JobsAction) -> int | None:
    """How many jobs an "all" action would change now (None: not an "all" action, or unknown)."""
    if change.all is None:
        return None
    counts = jobs.job_counts(settings, queue)
    return None if counts is None else int(getattr(counts, change.all))


def confirm_page(request: Request, access: Access, settings: AdminSettings, fields: dict[str, list[str]], queue: str,
                 verb: str, change: JobsAction, *, now_count: int | None, seen: str) -> HTMLResponse:
    """A bulk retry or delete posted without its confirmation (no JavaScript ran), or confirmed
    for a count that has changed since (`seen`): ask first, saying how many jobs it changes."""
    if fields.get("one"):
        what = f"job {change.keys[0]}"
    elif change.all is None:
        what = f"the {len(change.keys)} selected jobs"
    else:
        what = f"all {now_count} {change.all} jobs" if now_count is not None else f"all {change.all} jobs"
    state = (fields.get("state") or ["failed"])[0]
    kept = {name: values for name, values in fields.items() if name in ("all", "key", "one", "state", "next")}
    if now_count is not None:
        kept["seen"] = [str(now_count)]
    changed = f"The page showed {seen}; there are {now_count} now. " if seen else ""
    question = (f"{changed}{verb.capitalize()} {what} of {queue}?"
                + (" This cannot be undone." if verb == "delete" else ""))
    return render(request, "confirm.html", access, settings, title="Confirm", question=question, fields=kept,
                  button=f"Yes, {verb}", nav="queues",
                  action=f"/queues/{quote(queue, safe='')}/jobs/{verb}",
                  back=f"/queues/{quote(queue, safe='')}/jobs?{urlencode({'state': state if state in JOB_STATES else 'failed'})}")


@router.post("/queues/{queue}/jobs/{key}/cancel", response_model=None)
def cancel(queue: QueueName, key: str, request: Request, store: StoreDep, settings: SettingsDep,
           access: ActorDep, fields: FormDep) -> RedirectResponse | HTMLResponse:
    """The job page's Cancel: asked to confirm first (app.js's dialog sends confirm=yes;
    without JavaScript this page asks), then back to the job (now dead) or, removed, to
    its queue's jobs."""
    same_site(request)  # a form post: refused from another site, as the other actions
    if not _is_key(key):
        raise InvalidJobsAction(f"not a job key: {key!r}")
    # The list a removed job goes back to: the one it waited in (the job page's form says).
    state = fields.get("state", "")
    state = state if state in JOB_STATES and state not in ("running", "done") else "ready"
    if fields.get("confirm") != "yes":
        return render(request, "confirm.html", access, settings, title=f"Cancel job {key}?",
                      fields={"state": [state]}, question=f"Cancel job {key} of {queue}? A waiting job is removed; a running "
                               "one has its slot stopped and ends dead.",
                      action=request.url.path, button="Yes, cancel it", back=f"/jobs/{quote(key, safe='')}")
    result = cancel_job(settings, store, queue, key, now=settings.clock(), door="dashboard",
                        client_host=request.client.host if request.client else None, actor=access.actor)
    if result.results[key] == "cancelled":
        return RedirectResponse(f"/jobs/{quote(key, safe='')}", status_code=303)
    return RedirectResponse(f"/queues/{queue}/jobs?{urlencode({'state': state, 'cancelled': key})}", status_code=303)


def _is_key(text: str) -> bool:
    try:
        JobsAction(keys=[text])
    except ValidationError:
        return False
    return True
