"""The jobs part of the JSON API: list a queue's jobs by state, one job by key, retry, delete.

Included by api.py's router, so it shares its read rule (the admin token with protect_reads).
"""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from admin_ui import jobs
from admin_ui.deps import ActorDep, SettingsDep, StoreDep
from admin_ui.job_cancel import cancel_job
from admin_ui.jobs_access import JobsReaderDep
from admin_ui.schemas import (
    JOB_KEY_PATTERN,
    JobsAction,
    JobsActionResult,
    JobState,
    JobsView,
    JobView,
)
from config.models import QUEUE_NAME_PATTERN
from queue_server.protocol.job_positions import POSITION_PATTERN

router = APIRouter(tags=["jobs"])
QueueName = Annotated[str, Path(pattern=QUEUE_NAME_PATTERN)]
JobKey = Annotated[str, Path(pattern=JOB_KEY_PATTERN)]


@router.get("/api/queues/{queue}/jobs")
def queue_jobs(
    queue: QueueName, settings: SettingsDep, _: JobsReaderDep, state: JobState = "failed",
    limit: Annotated[int, Query(ge=1, le=jobs.MAX_LIMIT)] = 100,
    after: Annotated[str | None, Query(pattern=JOB_KEY_PATTERN)] = None,
    at: Annotated[str | None, Query(pattern=POSITION_PATTERN)] = None,
) -> JobsView:
    """The queue's jobs in `state` (failed: waiting for a retry; dead: out of attempts), `limit`
    at a time; pass the answer's `next_after` and `next_at` as `after` and `at` for the next
    page (with `at` it goes on even when that job left the state meanwhile; `after` alone
    gives an empty page then). Data is cut at 1 KiB. With an admin token configured,
    reading jobs needs it."""
    return jobs.list_jobs(settings, queue, state, limit=limit, after=after, at=at)


@router.get("/api/jobs/{key}")
def job(key: JobKey, settings: SettingsDep, _: JobsReaderDep) -> JobView:
    """One job by key, wherever it is (state, attempts, last error, next run), data whole."""
    return jobs.find_job(settings, key)


@router.post("/api/queues/{queue}/jobs/retry", tags=["actions"])
def retry(queue: QueueName, action: JobsAction, request: Request, store: StoreDep,
          settings: SettingsDep, access: ActorDep) -> JobsActionResult:
    """`{"keys": [...]}`: those jobs run again (dead ones with attempts reset);
    `{"all": "dead"}` or `{"all": "failed"}`: every such job of the queue."""
    return jobs.change_jobs(settings, store, queue, action, "retry", now=settings.clock(), door="api",
                            client_host=request.client.host if request.client else None, actor=access.actor)


@router.post("/api/queues/{queue}/jobs/delete", tags=["actions"])
def delete(queue: QueueName, action: JobsAction, request: Request, store: StoreDep,
           settings: SettingsDep, access: ActorDep) -> JobsActionResult:
    """`{"keys": [...]}`: delete those jobs (not running ones); `{"all": "dead"}`: every dead job."""
    return jobs.change_jobs(settings, store, queue, action, "delete", now=settings.clock(), door="api",
                            client_host=request.client.host if request.client else None, actor=access.actor)


@router.post("/api/queues/{queue}/jobs/{key}/cancel", tags=["actions"])
def cancel(queue: QueueName, key: JobKey, request: Request, store: StoreDep,
           settings: SettingsDep, access: ActorDep) -> JobsActionResult:
    """Cancel one job: a waiting one is removed ("removed"); a running one ends dead with
    "cancelled by api" ("cancelled"). 409 when the queue keeps it as finished (done);
    404 when the queue holds no such job."""
    return cancel_job(settings, store, queue, key, now=settings.clock(), door="api",
                      client_host=request.client.host if request.client else None, actor=access.actor)
