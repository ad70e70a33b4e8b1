"""The Jobs page over every queue, failures by error type and the Busy view (issue 26), as
pages and as JSON. Job data and errors: the jobs read rule (jobs_access.py).

The pages are plain GET forms (they work without JavaScript); blank fields mean "any".
`GET /jobs?key=K` still goes straight to job K (the header's search box).
"""
from __future__ import annotations

from typing import Annotated, Final
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError

from admin_ui.auth import Access
from admin_ui.deps import SettingsDep, get_access
from admin_ui.errors import InvalidJobsAction
from admin_ui.failure_groups import MAX_SAMPLES, failure_groups
from admin_ui.job_search import search_jobs
from admin_ui.jobs_access import JobsReaderDep, jobs_reader
from admin_ui.jobs_pages import find_job_page, render
from admin_ui.queue_roles import read_roles
from admin_ui.schemas import JOB_STATES
from admin_ui.search_schemas import FailureGroup, JobsSearchQuery, JobsSearchView
from config.models import QUEUE_NAME_PATTERN

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["jobs"])
# The page's "finished/failed/died within" choice: label -> seconds.
WITHIN_S: Final = {"15 min": 900, "1 h": 3600, "24 h": 86400, "7 days": 7 * 86400}
QUERY_FIELDS: Final = ("state", "queue", "prefix", "error_type", "since", "until", "limit", "from_queue", "after",
                           "at")


def page_query(request: Request, *, now: float, state: str | None = None) -> JobsSearchQuery:
    """The form's fields (blank ones left out; `within` becomes `since`) as a query."""
    fields: dict[str, object] = {name: value.strip() for name, value in request.query_params.items()
                                 if name in QUERY_FIELDS and value.strip()}
    if state is not None:
        fields["state"] = state
    within = request.query_params.get("within", "")
    # Ready jobs have no time: the form's "within" choice left set when picking Ready means nothing.
    if within in WITHIN_S and "since" not in fields and fields.get("state") != "ready":
        fields["since"] = now - WITHIN_S[within]
    try:
        return JobsSearchQuery.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidJobsAction(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


def next_link(view: JobsSearchView, request: Request) -> str | None:
    """The next page: the same query with the cursor moved on. A "within" choice goes on as
    the `since` it gave this page: worked out again at each page, the window moved on while
    the reader paged, and a later page searched other times than the first."""
    if view.next_queue is None:
        return None
    kept = {name: value for name, value in request.query_params.items()
            if name not in ("from_queue", "after", "at", "key", "within", "since", "until") and value}
    for name, moment in (("since", view.query.since), ("until", view.query.until)):
        if moment is not None:
            kept[name] = repr(moment)
    kept["from_queue"] = view.next_queue
    if view.next_after is not None:
        kept["after"] = view.next_after
    if view.next_at is not None:
        kept["at"] = view.next_at
    return f"{request.url.path}?{urlencode(kept)}"


@pages.get("/jobs", response_model=None)
def jobs_search_page(request: Request, settings: SettingsDep,
                     access: Annotated[Access, Depends(get_access)], key: str = "") -> HTMLResponse | RedirectResponse:
    if key.strip():
        return find_job_page(key)  # the job's page applies the jobs read rule
    jobs_reader(access)
    query = page_query(request, now=settings.clock())
    view = search_jobs(settings, query)
    chosen = request.query_params.get("within", "")
    return render(request, "jobs_search.html", access, settings, nav="jobs", view=view, states=JOB_STATES,
                  within=WITHIN_S, chosen_within=chosen if chosen in WITHIN_S else "",
                  next_href=next_link(view, request))


@pages.get("/busy")
def busy_page(request: Request, settings: SettingsDep, access: JobsReaderDep) -> HTMLResponse:
    view = search_jobs(settings, page_query(request, now=settings.clock(), state="running"))
    # With two or more queue servers, which is the primary (ROLE, read now).
    servers = read_roles(settings) if len(settings.queue_servers) > 1 else []
    return render(request, "busy.html", access, settings, nav="busy", view=view,
                  next_href=next_link(view, request), queue_servers=servers)


@pages.get("/failures")
def failures_page(request: Request, settings: SettingsDep, access: JobsReaderDep,
                  queue: Annotated[str | None, Query(pattern=QUEUE_NAME_PATTERN)] = None) -> HTMLResponse:
    groups = failure_groups(settings, queue)
    return render(request, "failures.html", access, settings, nav="failures", groups=groups, queue=queue,
                  max_samples=MAX_SAMPLES)


@api.get("/api/jobs")
def jobs_search(settings: SettingsDep, _: JobsReaderDep,
                query: Annotated[JobsSearchQuery, Query()]) -> JobsSearchView:
    """Jobs over every queue (or `queue`) in `state`: key `prefix`, last error's `error_type`,
    the state's own time in [`since`, `until`). Paginated on the queue server: pass the
    answer's `next_queue`, `next_after` and `next_at` as `from_queue`, `after` and `at` for
    the next page (`next_queue` null: the search is over; `at` lets it go on past a job that
    left the state meanwhile, where `after` alone ends that queue's search). A page may come back short with `cut_short` when it
    reached its bound of work on the queue server; the next page goes on."""
    return search_jobs(settings, query)


@api.get("/api/failures")
def failures(settings: SettingsDep, _: JobsReaderDep,
             queue: Annotated[str | None, Query(pattern=QUEUE_NAME_PATTERN)] = None) -> list[FailureGroup]:
    """Failed attempts per queue and error type since the queue server started, largest
    first, each with a sample: the newest dead (else failed) job whose last error has that type."""
    return failure_groups(settings, queue)
