"""JOB and JOBS: a job's description as JSON (PROTOCOL.md Part B "Job JSON"), read from the
store without changing it. Listings walk a queue: an operator's command, not a hot path."""
from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice
from operator import itemgetter
from typing import Any

from queue_server.protocol.jobs import slot_of
from queue_server.protocol.keyed import (
    DeadJob,
    Errors,
    JobMeta,
    Key,
    Meta,
    attempts_of,
    is_retry_wait,
    key_text,
)
from queue_server.server.store import Delayed, Job, QueueState, Store
from queue_server.server.store_types import K_ERRORS, Kept

PREVIEW_BYTES = 1024  # JOBS cuts each job's data here
_ENTRY_KEY = itemgetter(3)  # a ready entry's key


def _text(data: bytes, limit: int | None) -> tuple[str, bool]:
    cut = limit is not None and len(data) > limit
    return (data[:limit] if cut else data).decode("utf-8", "replace"), cut


def _view(key: Key, queue: str, state: str, priority: int, attempts: int, data: bytes,
          item: str | None, limit: int | None, *, error: str | None = None,
          failed_at: float | None = None, next_run_at: float | None = None,
          died_at: float | None = None, lease_id: int | None = None,
          trace: bytes | None = None) -> dict[str, Any]:
    text, cut = _text(data, limit)
    view: dict[str, Any] = {
        "key": key_text(key), "queue": queue, "state": state, "priority": priority,
        "attempts": attempts, "error": error, "failed_at": failed_at,
        "next_run_at": next_run_at, "died_at": died_at, "lease_id": lease_id,
        "expires_at": None, "item": item, "data_len": len(data), "data": text,
        "trace": None if trace is None else trace.decode("ascii"),
    }
    if limit is not None:
        view["data_truncated"] = cut
    return view


def _finished(entry: Kept, limit: int | None) -> dict[str, Any]:
    """A finished job kept (kept.py): its times, who finished it and its result."""
    key, queue, priority, data, item, attempts, errors, trace, _ready_at, started, done_at, ran_by, result = entry
    last = errors[-1] if errors else None
    view = _view(key, queue, "done", priority, attempts, data, item, limit,
                 error=last[2] if last else None, failed_at=last[0] if last else None, trace=trace)
    started_at = started or None
    view.update(started_at=started_at, done_at=done_at, ran_by=ran_by,
                runtime_s=None if started_at is None else max(0.0, done_at - started_at),
                result=None, result_len=None, result_kept=not isinstance(result, int))
    if isinstance(result, bytes):
        text, cut = _text(result, limit)
        view.update(result=text, result_len=len(result))
        if limit is not None:
            view["result_truncated"] = cut
    elif isinstance(result, int):
        view["result_len"] = result
    return view


def _meta_fields(meta: Meta) -> dict[str, Any]:
    if type(meta) is JobMeta:
        return {"error": meta.error, "failed_at": meta.failed_at, "trace": meta.trace}
    return {}


def _ready(state: QueueState, priority: int, entry: tuple[Any, ...], limit: int | None) -> dict[str, Any]:
    data, item, _ready_at, key, meta = entry
    return _view(key, state.name, "ready", priority, attempts_of(meta), data, item, limit,
                 **_meta_fields(meta))


def _delayed(entry: Delayed, limit: int | None) -> dict[str, Any]:
    until, _seq, name, priority, data, item, key, meta = entry
    state = "failed" if is_retry_wait(meta) else "delayed"
    return _view(key, name, state, priority, attempts_of(meta), data, item, limit,
                 next_run_at=until, **_meta_fields(meta))


def _running(job: Job, limit: int | None) -> dict[str, Any]:
    history = job.history
    view = _view(job.key, job.queue.name, "running", job.priority, job.attempts, job.data, job.item,
                 limit, error=history.error if history else None,
                 failed_at=history.failed_at if history else None, lease_id=job.id,
                 trace=history.trace if history else None)
    view["started_at"] = job.taken_at or None  # None: by a record logged before issue 26
    by = job.running_by
    place = slot_of(by)
    view.update(running_by=by, running_host=place[0] if place else None,
                running_slot=place[1] if place else None)
    return view


def _dead(dead: DeadJob, limit: int | None) -> dict[str, Any]:
    return _view(dead.key, dead.queue, "dead", dead.priority, dead.attempts, dead.data, dead.item,
                 limit, error=dead.error, failed_at=dead.failed_at, died_at=dead.died_at,
                 trace=dead.trace)


def job_view(store: Store, key: Key, *, with_errors: bool = False) -> dict[str, Any] | None:
    """The whole job (its data uncut), or None for an unknown key. `with_errors` (JOB ...
    ERRORS): also `errors`, the errors of its last failed attempts, oldest first."""
    found = _whole_job(store, key)
    if found is None:
        return None
    view, errors = found
    view["expires_at"] = store.ttl_at(key)
    if with_errors:
        view["errors"] = [{"at": at, "attempt": attempt, "error": text} for at, attempt, text in errors]
    return view


def kept_view(store: Store, key: Key, queue: str) -> dict[str, Any] | None:
    """The finished job `queue` keeps under `key`, whatever job holds the key now (keys are
    one namespace: a job of another queue may have taken it since), or None."""
    finished = store.kept.get(key)
    if finished is None or finished[1] != queue:
        return None
    view = _finished(finished, None)
    view["expires_at"] = None
    return view


def _errors(meta: Meta) -> Errors:
    return meta.errors if type(meta) is JobMeta else ()  # type: ignore[union-attr]


def _whole_job(store: Store, key: Key) -> tuple[dict[str, Any], Errors] | None:
    place = store.keys.get(key)
    if place is None:
        finished = store.kept.get(key)
        if finished is None:
            return None
        return _finished(finished, None), finished[K_ERRORS]
    if type(place) is Job:
        return _running(place, None), place.history.errors if place.history else ()  # type: ignore[union-attr]
    if type(place) is DeadJob:
        return _dead(place, None), place.errors  # type: ignore[union-attr]
    if type(place) is tuple:
        return _delayed(place, None), _errors(place[7])  # type: ignore[arg-type, index]
    assert isinstance(place, QueueState)
    for priority, entry in _ready_entries(place):
        if entry[3] == key:
            return _ready(place, priority, entry, None), _errors(entry[4])
    raise AssertionError(f"key {key!r} indexed as ready in {place.name} but not there")


def _ready_entries(state: QueueState, after: Key | None = None) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """Ready jobs in hand-out order (highest priority first, FIFO within one); with `after`,
    those past that job (none if it is not ready here). The walk to `after` runs in C
    (its level's keys as a list, then list.index and islice): 1,000,000 ready jobs took
    0.2 s to skip through this generator, a search cursor deep in the queue paid it per page."""
    priorities = sorted(state.levels, reverse=True)
    start = 0
    if after is not None:
        for index, priority in enumerate(priorities):
            level = state.levels[priority]
            try:
                start = list(map(_ENTRY_KEY, level)).index(after) + 1
            except ValueError:
                continue
            priorities = priorities[index:]
            break
        else:
            return
    gone = state.gone
    for priority in priorities:
        for entry in islice(state.levels[priority], start, None):
            if id(entry) in gone:
                continue  # its TTL ran out
            yield priority, entry
        start = 0


def listing(store: Store, queue: str, state_name: str, after: Key | None = None) -> Iterator[tuple[Key, Any]]:
    """(key, thing to describe) of one queue's jobs in `state_name`, in a stable order:
    ready in hand-out order, delayed/failed soonest first, running by lease id, dead and done
    newest first."""
    state = store.queues.get(queue)
    if state is None:
        return
    if state_name == "ready":
        for priority, entry in _ready_entries(state, after):
            yield entry[3], (priority, entry)
        return
    skipping = after is not None
    for key, thing in _others(store, state, queue, state_name):
        if skipping:
            skipping = key != after
            continue
        yield key, thing


def _others(store: Store, state: QueueState, queue: str, state_name: str) -> Iterator[tuple[Key, Any]]:
    """The listing of a state other than ready, from its start."""
    if state_name in ("delayed", "failed"):
        want_failed = state_name == "failed"
        for entry in store.delayed_jobs():
            if entry[2] == queue and is_retry_wait(entry[7]) == want_failed:
                yield entry[6], entry
    elif state_name == "running":
        for job_id in sorted(store.running):
            job = store.running[job_id]
            if job.queue is state:
                yield job.key, job
    elif state_name == "done":
        for finished in store.kept_jobs(queue):
            yield finished[0], finished
    else:
        for dead in reversed(state.dead.values()):
            yield dead.key, dead


def describe(store: Store, queue: str, state_name: str, key: Key, thing: Any) -> dict[str, Any]:
    """One listed job (from `listing`) as JOBS shows it: data and result cut at 1 KiB."""
    if state_name == "ready":
        priority, entry = thing
        view = _ready(store.queues[queue], priority, entry, PREVIEW_BYTES)
    elif state_name in ("delayed", "failed"):
        view = _delayed(thing, PREVIEW_BYTES)
    elif state_name == "running":
        view = _running(thing, PREVIEW_BYTES)
    elif state_name == "done":
        view = _finished(thing, PREVIEW_BYTES)
    else:
        view = _dead(thing, PREVIEW_BYTES)
    view["expires_at"] = store.ttl_at(key)
    return view


def jobs_view(store: Store, queue: str, state_name: str, limit: int, after: Key | None) -> list[dict[str, Any]]:
    """Up to `limit` jobs of `queue` in `state_name`, after the job `after` (if it is listed)."""
    found: list[dict[str, Any]] = []
    for key, thing in listing(store, queue, state_name, after):
        found.append(describe(store, queue, state_name, key, thing))
        if len(found) >= limit:
            break
    return found


def json_block(value: object) -> bytes:
    """`200 OK <len>` CRLF `<json>`."""
    body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b"200 OK %d\r\n" % len(body) + body
