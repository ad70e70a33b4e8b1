"""A JOBS search on the server (PROTOCOL.md Part B, queue_server/protocol/job_search.py):
walk one queue's listing in a state, past AFTER, examining at most SCAN jobs, and keep those
whose key starts with PREFIX, whose last error is of type ERROR (in any case: a user types
`valueerror` as Flower's search lets them) and whose time (died_at, done_at, ...: TIME_FIELD)
is in [SINCE, UNTIL).

Read only, answered offline too. The scan bound is what keeps one request short: a prefix
test costs well under a microsecond, a full check (the job's view built) a few, so a search
of SCAN_DEFAULT jobs holds the loop for milliseconds, and the caller goes on from `after`.
Skipping to AFTER walks the listing as a plain JOBS page does (no view is built; for ready
jobs in C, job_views._ready_entries).
"""
from __future__ import annotations

from typing import Any

from queue_server.protocol.job_search import TIME_FIELD, JobsSearch, page_json
from queue_server.protocol.keyed import Key, key_text
from queue_server.server.job_views import describe, listing
from queue_server.server.latency import error_type
from queue_server.server.store import Store


def _matches(view: dict[str, Any], state_name: str, search: JobsSearch, wanted_type: str | None) -> bool:
    if wanted_type is not None:
        error = view.get("error")
        if error is None or error_type(error).lower() != wanted_type:
            return False
    if search.since is not None or search.until is not None:
        at = view.get(TIME_FIELD[state_name])
        if at is None:
            return False
        if search.since is not None and at < search.since:
            return False
        if search.until is not None and at >= search.until:
            return False
    return True


def search_jobs(store: Store, queue: str, state_name: str, limit: int, after: Key | None,
                search: JobsSearch) -> dict[str, Any]:
    """`{"jobs": [...], "after": <key to go on from, or null at the listing's end>, "scanned": n}`."""
    found: list[dict[str, Any]] = []
    scanned = 0
    last: Key | None = None
    prefix = search.prefix
    # Types are ASCII names (ERROR_TYPE_RE, latency._TYPE), so lower() is the whole of case folding.
    wanted_type = search.error_type.lower() if search.error_type is not None else None
    for key, thing in listing(store, queue, state_name, after):
        if scanned >= search.scan or len(found) >= limit:
            return page_json(found, key_text(last) if last is not None else None, scanned)
        scanned += 1
        last = key
        if prefix is not None and not key_text(key).startswith(prefix):
            continue
        view = describe(store, queue, state_name, key, thing)
        if _matches(view, state_name, search, wanted_type):
            found.append(view)
    return page_json(found, None, scanned)
