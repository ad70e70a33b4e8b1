"""The Jobs page's search over every queue (issue 26): key prefix, queue, state, error type and
time range, paginated on the queue server (JOBS search, PROTOCOL.md Part B).

The queue server examines at most SCAN_PER_CALL jobs per request and says where it stopped;
a page asks at most MAX_CALLS times, so one page costs the server a bounded amount of work
however large the queues. The cursor is (queue, key): the queue the next page starts in and
the job after which it goes on there, with that job's position (JOBS ... AT), so the search
goes on there even when that job left the state meanwhile. Queues whose STATS count for the state is 0 are skipped
without a request.
"""
from __future__ import annotations

from typing import Final

from admin_ui.jobs import job_view
from admin_ui.queue_link import ask
from admin_ui.schemas import JobView
from admin_ui.search_schemas import JobsSearchQuery, JobsSearchView
from admin_ui.settings import AdminSettings
from queue_server.client import QueueClient
from queue_server.protocol.replies import QueueStats

SCAN_PER_CALL: Final = 5_000
MAX_CALLS: Final = 20
# The STATS count of each state (a state without one here, e.g. a new one, is searched anyway).
COUNT_OF_STATE: Final = {"ready": "ready", "delayed": "delayed", "failed": "failed",
                         "running": "running", "dead": "dead", "done": "kept"}


def _may_hold(stats: QueueStats, state: str) -> bool:
    count_name = COUNT_OF_STATE.get(state)
    return count_name is None or bool(getattr(stats, count_name, 1))


def _queues(client: QueueClient, query: JobsSearchQuery) -> list[str]:
    """The queues to search, in name order, from the cursor's queue on."""
    if query.queue is not None:
        return [query.queue]
    stats = client.stats()
    names = sorted(name for name, entry in stats.items() if name != "*" and _may_hold(entry, query.state))
    if query.from_queue is not None:
        names = [name for name in names if name >= query.from_queue]
    return names


def _run(client: QueueClient, query: JobsSearchQuery) -> JobsSearchView:
    found: list[JobView] = []
    scanned = calls = 0
    names = _queues(client, query)
    resuming = query.from_queue is not None or query.queue is not None
    after = query.after if resuming else None
    at = query.at if resuming and after is not None else None
    for index, name in enumerate(names):
        following = names[index + 1] if index + 1 < len(names) else None
        while True:
            if calls >= MAX_CALLS:
                return JobsSearchView(query=query, jobs=found, scanned=scanned, next_queue=name,
                                      next_after=after, next_at=at, cut_short=True)
            page = client.search_jobs(name, query.state, limit=query.limit - len(found), after=after,
                                      at=at, prefix=query.prefix, error_type=query.error_type,
                                      since=query.since, until=query.until, scan=SCAN_PER_CALL)
            calls += 1
            scanned += page.scanned
            found += [job_view(info) for info in page.jobs]
            after, at = page.after, page.position
            if len(found) >= query.limit:
                if after is None and following is None:
                    return JobsSearchView(query=query, jobs=found, scanned=scanned)
                return JobsSearchView(query=query, jobs=found, scanned=scanned,
                                      next_queue=name if after is not None else following, next_after=after,
                                      next_at=at)
            if after is None:
                break
    return JobsSearchView(query=query, jobs=found, scanned=scanned)


def search_jobs(settings: AdminSettings, query: JobsSearchQuery) -> JobsSearchView:
    """One page of jobs matching `query`, over every queue (or the one named)."""
    return ask(settings, lambda client: _run(client, query))
