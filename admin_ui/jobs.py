"""Jobs on the queue server as the dashboard shows and changes them: lists, one job, retry, delete.

The queue server answers (through queue_link); every retry or delete also writes an event
with its actor (the role of the token: `admin` or `operator`) that says its door (the dashboard's forms or the JSON API), like the
dashboard's other actions. The queue server counts them under that door too (CLIENT NAME),
and the manager writes events for the other doors' (manager/events/job_actions.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from admin_ui.errors import (
    InvalidJobsAction,
    JobNotFound,
    QueueServerRefused,
    QueueServerUnavailable,
)
from admin_ui.queue_link import ask
from admin_ui.schemas import (
    JobCounts,
    JobErrorView,
    JobsAction,
    JobsActionResult,
    JobState,
    JobsView,
    JobView,
)
from admin_ui.settings import AdminSettings
from admin_ui.views import delayed_only
from manager.storage.store import EventKind, NewEvent, Store
from queue_server.client import QueueClient
from queue_server.protocol.job_info import JobInfo, error_summary

ACTOR = "admin"
Verb = Literal["retry", "delete"]
Door = Literal["dashboard", "api"]
DOOR_WORDS: dict[Door, str] = {"dashboard": "on the dashboard", "api": "through the API"}
EVENT_KINDS: dict[Verb, EventKind] = {"retry": EventKind.JOBS_RETRIED, "delete": EventKind.JOBS_DELETED}
MAX_LIMIT = 1000
# Keys kept in an event's detail: a retry of 10,000 jobs names the first ones only.
EVENT_KEYS = 100


def job_view(info: JobInfo) -> JobView:
    """The queue server's JobInfo (the JOB/JOBS JSON) as the view model, with the error's summary."""
    fields = info.model_dump()
    if info.errors is not None:
        fields["errors"] = [JobErrorView(**entry.model_dump(), error_summary=error_summary(entry.error))
                            for entry in info.errors]
    return JobView(**fields, error_summary=error_summary(info.error))


def _counts(client: QueueClient, queue: str) -> JobCounts | None:
    stats = client.stats(queue).get(queue)
    if stats is None:
        return None
    return JobCounts(ready=stats.ready, delayed=delayed_only(stats.delayed, stats.failed), failed=stats.failed,
                     running=stats.running, dead=stats.dead, done=stats.kept)


def job_counts(settings: AdminSettings, queue: str) -> JobCounts | None:
    """The queue's jobs per state, or None when the queue server is not there (pages still show)."""
    try:
        return ask(settings, lambda client: _counts(client, queue))
    except (QueueServerUnavailable, QueueServerRefused):
        return None


def list_jobs(settings: AdminSettings, queue: str, state: JobState, *, limit: int = 100,
              after: str | None = None, at: str | None = None) -> JobsView:
    """A page of `queue`'s jobs in `state` (the queue server's order), with the counts per state.
    `after` and `at`: the last job of the page before and its position (paging goes on past
    it even when that job left the state meanwhile)."""
    def request(client: QueueClient) -> JobsView:
        infos = client.jobs(queue, state, limit=limit, after=after, at=at if after is not None else None)
        jobs = [job_view(info) for info in infos]
        full = bool(infos) and len(infos) >= limit
        return JobsView(queue=queue, state=state, limit=limit, jobs=jobs, counts=_counts(client, queue),
                        next_after=infos[-1].key if full else None,
                        next_at=infos[-1].position if full else None)
    return ask(settings, request)


def find_job(settings: AdminSettings, key: str) -> JobView:
    info = ask(settings, lambda client: client.job(key, errors=True))
    if info is None:
        raise JobNotFound(f"no job {key!r} on the queue server (deleted, never put, or finished longer "
                          "ago than its queue keeps finished jobs)")
    return job_view(info)


def _check(action: JobsAction, verb: Verb) -> None:
    if bool(action.keys) == (action.all is not None):
        raise InvalidJobsAction(f"{verb}: give either keys or all, not {'both' if action.keys else 'neither'}")
    if verb == "delete" and action.all not in (None, "dead"):
        raise InvalidJobsAction("delete all works on dead jobs only (delete failed jobs by key)")


def _by_key(client: QueueClient, verb: Verb, queue: str, keys: Sequence[str]) -> list[str]:
    """Per key: ok, not_found, or (delete) running."""
    if verb == "retry":
        return ["ok" if found else "not_found" for found in client.retry(queue, *keys)]
    return [str(outcome) for outcome in client.delete(queue, *keys)]


def _all(client: QueueClient, verb: Verb, queue: str, state: str) -> int:
    return client.retry_all(queue, state) if verb == "retry" else client.delete_all_dead(queue)


def change_jobs(settings: AdminSettings, store: Store, queue: str, action: JobsAction, verb: Verb, *,
                now: float, door: Door, client_host: str | None = None, actor: str = ACTOR) -> JobsActionResult:
    """Retry: dead jobs go back to ready with attempts reset, failed ones run now (attempts kept).
    Delete: ready, delayed, failed or dead jobs by key (running ones are refused), or all dead.
    Either writes an event with `actor` (the token's role), saying the door (dashboard or api)."""
    _check(action, verb)
    results: dict[str, str] = {}
    state = action.all
    if state is not None:
        count = ask(settings, lambda client: _all(client, verb, queue, state), door=door)
        what = f"all {count} {state} jobs"
    else:
        outcomes = ask(settings, lambda client: _by_key(client, verb, queue, action.keys), door=door)
        results = dict(zip(action.keys, outcomes, strict=True))
        count = sum(1 for outcome in outcomes if outcome == "ok")
        what = _what(action.keys, count)
    message = f"{verb} of {what} of {queue} by {actor} {DOOR_WORDS[door]}"
    detail = {**_detail(action, results, count, client_host), "door": door}
    event_id = store.add_event(now, NewEvent(kind=EVENT_KINDS[verb], message=message, queue=queue, actor=actor,
                                             detail=detail))
    return JobsActionResult(queue=queue, action=verb, results=results, count=count,
                            event_id=event_id, message=message)


def _what(keys: Sequence[str], count: int) -> str:
    named = keys[0] if len(keys) == 1 else f"{len(keys)} jobs"
    return named if count == len(keys) else f"{named} ({count} found)"


def _detail(action: JobsAction, results: dict[str, str], count: int,
            client_host: str | None) -> dict[str, object]:
    missed = {key: outcome for key, outcome in results.items() if outcome != "ok"}
    return {"all": action.all, "keys": action.keys[:EVENT_KEYS], "count": count,
            "not_done": dict(list(missed.items())[:EVENT_KEYS]), "client": client_host}
