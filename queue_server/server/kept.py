"""Finished jobs kept a while (per queue: keep_done_max, keep_done_s), so "did job X run,
when, where, and what did it return?" has an answer (JOB, JOBS <q> done, RESULT); no I/O.

A kept job is one tuple of atomic values (store_types.py `Kept`), made by DONE inline
(store_core.py): the garbage collector stops tracking such tuples, so a million of them
cost its collections nothing (as Job objects, a full collection took 1.2 s). Each queue
keeps its finished jobs oldest first in a deque, and `store.kept` maps a key to its newest
finished job: a producer's key that finished twice leaves a stale entry in the deque,
skipped here. Each queue counts its stale entries (`kept_stale`), and keep_max and STATS
count the others only: counting the deque's length, a key finished three times in a queue
of keep_done_max 3 pushed every other finished job out, and STATS said 3 kept beside a
listing of 1. A deque more than half stale is compacted (amortized O(1) per DONE), so a key
finished again and again cannot grow it past twice its queue's live entries.

Durable as the rest of the queue: SYNC DONE carries the finish time, the finishing
connection and the result, so a log replay and a replica keep the same jobs, and a
snapshot writes them as SYNC KEPT. The count bounds are applied at every DONE, so replicas
drop the same jobs; the age bound is the primary's sweep (housekeeping, every 0.5 s),
recorded as SYNC PRUNE <time>, whose replay drops the same jobs (the bounds being the
same config on every server, as for dead jobs).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from queue_server.protocol.keyed import Errors, Key
from queue_server.server import records
from queue_server.server.store_index import StoreIndex
from queue_server.server.store_types import K_DONE_AT, Kept, QueueState

# Below this many stale finished jobs a queue's deque is left as it is (compacting costs a
# pass over it).
COMPACT_MIN_STALE = 64


class KeptJobs(StoreIndex):
    __slots__ = ()  # store_index.py StoreIndex has them all

    def kept_jobs(self, name: str) -> Iterator[Kept]:
        """The finished jobs `name` keeps, newest first."""
        state = self.queues.get(name)
        if state is None or not state.kept:
            return
        index = self.kept
        for entry in reversed(state.kept):
            if index.get(entry[0]) is entry:
                yield entry

    def prune_kept(self, now: float) -> int:
        """Drop the finished jobs older than their queue's keep_done_s at `now`; how many went
        (recorded as SYNC PRUNE <now> when some did: its replay drops the same ones)."""
        dropped = 0
        index = self.kept
        for name, state in list(self.with_kept.items()):
            kept = state.kept
            oldest_allowed = now - self.policy(name).keep_done_s
            while kept and kept[0][K_DONE_AT] < oldest_allowed:
                entry = kept.popleft()
                if index.get(entry[0]) is entry:
                    del index[entry[0]]
                    dropped += 1
                else:
                    state.kept_stale -= 1
            if not kept:
                del self.with_kept[name]
        if dropped:
            self.changes.append(records.prune(now))
        return dropped

    def keep_record(self, name: str, priority: int, data: bytes, item: str | None, key: Key,
                    attempts: int, errors: Errors, trace: bytes | None, *, ready_at: float,
                    started_at: float, done_at: float, ran_by: str | None,
                    result: bytes | int | None) -> None:
        """SYNC KEPT (snapshots): a finished job as it was kept."""
        state = self.queue(name)
        if type(key) is int and key >= self.next_key:
            self.next_key = key + 1
        entry: Kept = (key, name, priority, data, item, attempts, errors, trace, ready_at, started_at,
                       done_at, ran_by, result)
        kept = state.kept
        if kept is None:
            kept = state.kept = deque()
        kept.append(entry)
        self.with_kept[name] = state
        replaced = self.kept.get(key)
        self.kept[key] = entry
        if replaced is not None:
            mark_stale(self, replaced)
        if kept and (len(kept) - state.kept_stale > state.keep_max or len(self.kept) > self.keep_done_total):
            oldest = kept.popleft()
            if self.kept.get(oldest[0]) is oldest:
                del self.kept[oldest[0]]
            else:
                drop_oldest(self, state)
        self.changes.append(records.kept(entry))

    def kept_records(self) -> Iterator[bytes]:
        """SYNC KEPT of every finished job kept, oldest first per queue (snapshots)."""
        for state in self.with_kept.values():
            for entry in state.kept or ():
                if self.kept.get(entry[0]) is entry:
                    yield records.kept(entry)


def mark_stale(store: StoreIndex, old: Kept) -> None:
    """DONE of a key that was kept finished already: `old` (no longer indexed) is stale
    in its queue's deque; compact that deque once most of it is stale."""
    state = store.queues.get(old[1])
    if state is None or not state.kept:
        return
    state.kept_stale += 1
    kept = state.kept
    if state.kept_stale >= COMPACT_MIN_STALE and 2 * state.kept_stale > len(kept):
        index = store.kept
        live = [entry for entry in kept if index.get(entry[0]) is entry]
        kept.clear()  # in place: DONE holds this deque
        kept.extend(live)
        state.kept_stale = 0


def drop_oldest(store: StoreIndex, state: QueueState) -> None:
    """Over a bound, DONE dropped the oldest entry of `state`, a stale one, which counted for
    nothing: drop stale ones until the oldest live finished job goes."""
    state.kept_stale -= 1
    kept = state.kept
    index = store.kept
    while kept:
        oldest = kept.popleft()
        if index.get(oldest[0]) is oldest:
            del index[oldest[0]]
            return
        state.kept_stale -= 1
