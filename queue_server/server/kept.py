"""Finished jobs kept a while (per queue: keep_done_max, keep_done_s), so "did job X run,
when, where, and what did it return?" has an answer (JOB, JOBS <q> done, RESULT); no I/O.

A kept job is the very Job that ran, with `done_at`, `ran_by` and `result` set by DONE
(store_core.py keeps it inline: the hot path allocates nothing). Each queue keeps its
finished jobs oldest first in a deque, and `store.kept` maps a key to its newest finished
job: a producer's key that finished twice leaves a stale entry in the deque, skipped here.

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

from queue_server.protocol.keyed import Errors, JobMeta, Key
from queue_server.server import records
from queue_server.server.store_index import StoreIndex
from queue_server.server.store_types import Job, QueueState


class KeptJobs(StoreIndex):
    def kept_jobs(self, name: str) -> Iterator[Job]:
        """The finished jobs `name` keeps, newest first."""
        state = self.queues.get(name)
        if state is None or not state.kept:
            return
        index = self.kept
        for job in reversed(state.kept):
            if index.get(job.key) is job:
                yield job

    def kept_count(self, state: QueueState) -> int:
        """Finished jobs `state` keeps (its deque less the stale entries: an upper bound
        without a walk, exact when no key finished twice)."""
        return len(state.kept) if state.kept else 0

    def prune_kept(self, now: float) -> int:
        """Drop the finished jobs older than their queue's keep_done_s at `now`; how many went
        (recorded as SYNC PRUNE <now> when some did: its replay drops the same ones)."""
        dropped = 0
        index = self.kept
        for name, state in list(self.with_kept.items()):
            kept = state.kept
            oldest_allowed = now - self.policy(name).keep_done_s
            while kept and kept[0].done_at < oldest_allowed:
                job = kept.popleft()
                if index.get(job.key) is job:
                    del index[job.key]
                    dropped += 1
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
        history = JobMeta(attempts, errors, trace=trace) if errors or trace is not None else None
        job = Job(state, priority, data, item, 0, key, attempts, history, None, None, False, False,
                  ready_at, started_at)
        job.done_at = done_at
        job.ran_by = ran_by
        job.result = result
        kept = state.kept
        if kept is None:
            kept = state.kept = deque()
        kept.append(job)
        self.with_kept[name] = state
        self.kept[key] = job
        if len(kept) > state.keep_max or len(self.kept) > self.keep_done_total:
            oldest = kept.popleft()
            if self.kept.get(oldest.key) is oldest:
                del self.kept[oldest.key]
        self.changes.append(records.kept(job))

    def kept_records(self) -> Iterator[bytes]:
        """SYNC KEPT of every finished job kept, oldest first per queue (snapshots)."""
        for state in self.with_kept.values():
            for job in state.kept or ():
                if self.kept.get(job.key) is job:
                    yield records.kept(job)
