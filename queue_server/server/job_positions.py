"""JOBS pages that resume at a position (PROTOCOL.md Part B, queue_server/protocol/job_positions.py):
each listed job's place in its listing's order, and the listing past such a place, whether
or not the job that stood there is still in the state.

Each order has a value that stays put when jobs leave: ready jobs a place in their
priority's line (store_types.Level: its head counts what left from the front, and nothing
leaves from the middle), delayed and failed jobs their (time, sequence) in the delayed heap,
dead jobs their order of death (DeadJob.seq), running jobs their lease id, finished jobs their
done_at and the entry itself (a finished job leaves the deque only from its old end, or is
left in it stale when its key finishes again). Resuming costs what the walk to AFTER costs.

What a place cannot tell: a job put back at the front of its line (LATER ... FRONT) takes the
place of the last one handed out from there, so a job of the page before that was handed
out and put back so may show again (it came back meanwhile). A finished job's entry dropped
by compaction (its key finished again, kept.py) leaves only its time: the jobs that
finished in the same instant and older than it are then skipped.

A place or sequence from another store (a restart, a CLONE, another server: `run` differs)
means nothing here: such a page is placed by its key if that job is still listed, else by
its time or priority, repeating the rows of equal time rather than skipping any.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from itertools import islice
from operator import itemgetter
from typing import Any

from queue_server.protocol.job_positions import ListPosition
from queue_server.protocol.keyed import DeadJob, Key, is_retry_wait
from queue_server.server.store import QueueState, Store
from queue_server.server.store_types import K_DONE_AT

_ENTRY_KEY = itemgetter(3)  # a ready entry's key
ReadyRow = tuple[int, tuple[Any, ...], int, int]  # priority, entry, level gen, place


def position_of(store: Store, state_name: str, thing: Any) -> str:
    """The position of one listed job (a `thing` of job_views.listing), in the form
    protocol/job_positions.py parses; floats in repr, so they read back exactly. (f-strings:
    0.3 us a row; a generic join of the numbers took 3.4 us, 3 ms on a page of 1,000.)"""
    if state_name == "ready":
        return f"{store.run}:{thing[0]}:{thing[2]}:{thing[3]}"
    if state_name in ("delayed", "failed"):
        return f"{store.run}:{thing[1]}:{thing[0]!r}"
    if state_name == "running":
        return str(thing.id)
    if state_name == "done":
        return repr(thing[K_DONE_AT])
    return f"{store.run}:{thing.seq}:{thing.died_at!r}"


def ready_rows(state: QueueState, priority: int | None = None, start: int = 0) -> Iterator[ReadyRow]:
    """Ready jobs in hand-out order (highest priority first, FIFO within one), from index
    `start` of the level of `priority` (None: from the top), then the lower priorities."""
    levels = state.levels
    priorities = sorted(levels, reverse=True)
    if priority is not None:
        priorities = [level for level in priorities if level <= priority]
    gone = state.gone
    for level_priority in priorities:
        level = levels[level_priority]
        first = start if level_priority == priority else 0
        place, gen = level.head + first, level.gen
        for entry in islice(level, first, None):
            if id(entry) not in gone:  # taken out of turn (TTL, DELETE)
                yield level_priority, entry, gen, place
            place += 1


def key_index(level: Any, key: Key) -> int | None:
    """The index of `key` in a ready level, or None. In C (its keys as a list, then
    list.index): 1,000,000 ready jobs took 0.2 s to skip through a generator."""
    try:
        return list(map(_ENTRY_KEY, level)).index(key)
    except ValueError:
        return None


def resumed(store: Store, queue: str, state_name: str, after: Key,
            at: ListPosition) -> Iterator[tuple[Key, Any]]:
    """(key, thing) of `queue`'s jobs in `state_name` past the position `at` of `after`."""
    state = store.queues.get(queue)
    if state is None:
        return
    ours = at.run == store.run
    if state_name == "ready":
        rows = _ready_past(state, after, at, ours)
        yield from ((row[1][3], row) for row in rows)
    elif state_name in ("delayed", "failed"):
        yield from _delayed_past(store, queue, state_name == "failed", after, at, ours)
    elif state_name == "running":
        ids = sorted(store.running)
        for job_id in islice(ids, bisect_right(ids, at.order[0]), None):
            job = store.running[job_id]
            if job.queue is state:
                yield job.key, job
    elif state_name == "done":
        yield from _done_past(store, state, after, at.order[0])
    else:
        yield from _dead_past(state, after, at, ours)


def _ready_past(state: QueueState, after: Key, at: ListPosition, ours: bool) -> Iterator[ReadyRow]:
    priority, gen, place = (int(number) for number in at.order)
    level = state.levels.get(priority)
    if level is None:
        start = 0
    elif ours:
        # A level made anew since holds only jobs that came after the page: all of them.
        start = max(0, place + 1 - level.head) if level.gen == gen else 0
    else:
        index = key_index(level, after)
        start = 0 if index is None else index + 1  # gone: its line again, nothing skipped
    return ready_rows(state, priority, start)


def _delayed_past(store: Store, queue: str, want_failed: bool, after: Key, at: ListPosition,
                  ours: bool) -> Iterator[tuple[Key, Any]]:
    seq, until = int(at.order[0]), at.order[1]
    delayed = store.delayed_jobs()  # (until, seq, ...) sorted: a (time, sequence) bisects
    if not ours:
        place = store.keys.get(after)
        if type(place) is tuple and place[2] == queue:
            until, seq = place[0], place[1]
        else:
            seq = -1  # its time again: the rows of equal time repeat, none skipped
    for entry in islice(delayed, bisect_left(delayed, (until, seq + 1)), None):
        if entry[2] == queue and is_retry_wait(entry[7]) == want_failed:
            yield entry[6], entry


def _dead_past(state: QueueState, after: Key, at: ListPosition, ours: bool) -> Iterator[tuple[Key, Any]]:
    seq, died_at = int(at.order[0]), at.order[1]
    if not ours:
        dead: DeadJob | None = state.dead.get(after)
        if dead is None:
            for dead in reversed(state.dead.values()):
                if dead.died_at <= died_at and dead.key != after:
                    yield dead.key, dead
            return
        seq = dead.seq
    for dead in reversed(state.dead.values()):
        if dead.seq < seq:  # newest first: a prefix is skipped, then all
            yield dead.key, dead


def _done_past(store: Store, state: QueueState, after: Key, done_at: float) -> Iterator[tuple[Key, Any]]:
    if not state.kept:
        return
    index = store.kept
    entries = reversed(state.kept)
    for entry in entries:  # the entry itself, stale or not, is still in the deque
        if entry[0] == after and entry[K_DONE_AT] == done_at:
            for finished in entries:
                if index.get(finished[0]) is finished:
                    yield finished[0], finished
            return
    # Pruned (its older neighbours with it) or compacted away: by its time.
    for finished in store.kept_jobs(state.name):
        if finished[K_DONE_AT] < done_at:
            yield finished[0], finished
