"""The queue state's changes: PUT, hand-outs, DONE, LATER, delays, replay; no I/O.

Every change appends its SYNC record (the log and replication form) to the changes the
store hands out (`drain_changes`), so a store rebuilt by applying those records is the
same store. Costs per operation are O(log P) for P distinct priorities of a queue and
O(log n) for timed jobs; nothing scans a queue. Time is always passed in (unix seconds).
"""
from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable
from time import time as wall_clock

from queue_server.protocol.keyed import DeadJob, JobMeta, Key, Meta, solo_meta
from queue_server.protocol.numbers import counter_of_name
from queue_server.server import kept as kept_jobs
from queue_server.server import records
from queue_server.server.latency import new_latency
from queue_server.server.records import GET_LAST_LINE, GET_LINE
from queue_server.server.store_index import StoreIndex
from queue_server.server.store_types import (
    _DONE,
    _DONE_HOLDING,
    NOT_FOUND,
    DoneResult,
    Entry,
    Job,
    Kept,
    QueueState,
    new_object,
)


class CoreStore(StoreIndex):
    """Queues, priorities, hand-outs, DONE/LATER, delays and the key index (on
    store_index.py's indexes and counters); store.py's Store adds failures, dead jobs,
    TOUCH, RETRY and DELETE."""

    __slots__ = ()  # store_index.py StoreIndex has them all

    # ------------------------------------------------------------ changes

    def put(
        self, name: str, priority: int, data: bytes, item: str | None, now: float,
        *, until: float | None = None, replaying: bool = False, key: Key | None = None,
        meta: Meta = 0, ttl_at: float | None = None,
    ) -> Key:
        """Add a job; with `until` in the future it stays delayed until then. Returns its key.

        Without `key` the job gets the server's next key; the record then leaves it out
        (a replay makes the same key from the same counter). A producer's key that a dead
        job holds is taken over (the dead record goes). The caller checks that no live job
        holds `key` (unique jobs). `ttl_at`: deleted then unless handed out before (TTL).
        When replaying records, a delayed job waits for its
        SYNC WAKE record whatever the clock says, so the replay hands jobs out in the
        original order.
        """
        state = self.queues.get(name) or self.queue(name)
        if key is None:
            key = self.next_key
            self.next_key = key + 1
            record_key: Key | None = None
        else:
            record_key = key
            if type(key) is int and key >= self.next_key:
                self.next_key = key + 1
            old = self.keys.get(key)
            if type(old) is DeadJob:
                self._unbury(old)  # type: ignore[arg-type]
                self.queues[old.queue].dead_dropped += 1  # type: ignore[union-attr]  # (else in no counter)
        if not (state.ready or state.delayed or state.running):  # _enter without a call: hot
            self._holding += 1
        self._count_waiting(state, priority)
        state.put += 1
        if item is not None:
            self.items[item] = self.items.get(item, 0) + 1
            number = counter_of_name(item)  # a producer's `_<n>`: NEW never makes it again
            if number is not None and number >= self.next_item:
                self.next_item = number + 1
        if until is not None and (until > now or replaying):
            self.changes.append(records.put(name, priority, data, item, until, record_key, meta, ttl_at))
            self._delay(state, priority, data, item, until, key, meta)
            if ttl_at is not None:
                self._mark_ttl(key, ttl_at, priority, None)
            return key
        self.changes.append(records.put(name, priority, data, item, None, record_key, meta, ttl_at))
        entry = (data, item, now, key, meta)
        self._append_ready(state, priority, entry)
        if ttl_at is not None:
            self._mark_ttl(key, ttl_at, priority, entry)
        return key

    def choose_queue(self, names: tuple[str, ...] | None) -> QueueState | None:
        """Uniformly among non-empty queues (of `names`, or of all queues)."""
        if names is None:
            return self.rng.choice(self._nonempty) if self._nonempty else None
        if len(names) == 1:
            state = self.queues.get(names[0])
            return state if state is not None and state.ready else None
        queues = self.queues
        candidates = [queues[n] for n in dict.fromkeys(names) if n in queues and queues[n].ready]
        return self.rng.choice(candidates) if candidates else None

    def take(
        self, names: tuple[str, ...] | None, count: int, now: float,
        expire_s: float | None, then_done: bool | None, managed: bool = False, by: bytes = b"",
    ) -> list[Job]:
        """Hand out up to `count` jobs: each batch member chosen as a GET would choose.
        `by`: ` BY <CLIENT NAME>` of the taking connection (b"": unnamed).

        A solo job (failed with SOLO) is handed out alone: a batch that reaches it stops
        before it, or is that job alone.
        """
        jobs: list[Job] = []
        if now != self._at_time:  # self._handed(now), inlined: one call less per GET
            micro = int(now * 1e6)
            self._at_time = now
            self._at_rounded = now = micro / 1e6
            self._at_option = handed = b" AT %d.%06d" % divmod(micro, 1_000_000)
        else:
            now, handed = self._at_rounded, self._at_option
        if names is not None and len(names) == 1:  # the slot's case: one queue, one expiry
            state = self.queues.get(names[0])
            if state is None:
                return jobs
            expire_at, lock_s = self._expiry(state, now, expire_s)
            heap, levels = state.heap, state.levels
            for _ in range(min(count, state.ready)):
                priority = -heap[0]
                level = levels.get(priority)
                if level and len(level) > 1 and not state.gone:  # _pop_first without its call (hot)
                    entry = level.popleft()
                else:
                    priority, entry = self._pop_first(state)
                if type(entry[4]) is not int and entry[4].solo and count > 1:  # type: ignore[union-attr]
                    if jobs:
                        self._push_front(state, priority, entry)
                        break
                    jobs.append(self._hand_out(state, priority, entry, expire_at, lock_s, then_done,
                                               managed, handed, by, False, 0, now))
                    break
                # last=False, job_id=0, now=now, positional: keywords cost a name match each per call
                jobs.append(self._hand_out(state, priority, entry, expire_at, lock_s, then_done,
                                           managed, handed, by, False, 0, now))
            return jobs
        while len(jobs) < count:
            state = self.choose_queue(names)
            if state is None:
                break
            priority, entry = self._pop_first(state)
            solo = type(entry[4]) is not int and entry[4].solo and count > 1  # type: ignore[union-attr]
            if solo and jobs:
                self._push_front(state, priority, entry)
                break
            expire_at, lock_s = self._expiry(state, now, expire_s)
            jobs.append(self._hand_out(state, priority, entry, expire_at, lock_s, then_done,
                                       managed, handed, by, last=False, now=now))
            if solo:
                break
        return jobs

    def take_last(
        self, name: str, priority: int, now: float, expire_s: float | None, then_done: bool | None,
        by: bytes = b"",
    ) -> Job:
        """Hand out the job just made ready in `name` (it is the last of its priority)."""
        state = self.queues[name]
        entry = self._pop_at(state, priority, last=True)
        assert entry is not None, "take_last: no ready job of that priority"
        now, handed = self._handed(now)
        expire_at, lock_s = self._expiry(state, now, expire_s)
        return self._hand_out(state, priority, entry, expire_at, lock_s, then_done, False, handed, by,
                              last=True, now=now)

    def _handed(self, now: float) -> tuple[float, bytes]:
        """A live hand-out's time cut to whole microseconds (records.micro_time), and its
        record's ` AT <t>`, made once per GET for all the jobs it hands out."""
        if now != self._at_time:
            self._at_time = now
            self._at_rounded, at_text = records.micro_time(now)
            self._at_option = b" AT " + at_text
        return self._at_rounded, self._at_option

    @staticmethod
    def _expiry(state: QueueState, now: float, expire_s: float | None) -> tuple[float | None, float | None]:
        if expire_s is None:
            expire_s = state.lock_timeout_s
        return (None, None) if expire_s is None else (now + expire_s, expire_s)

    def _hand_out(
        self, state: QueueState, priority: int, entry: Entry, expire_at: float | None,
        lock_s: float | None, then_done: bool | None, managed: bool, handed: bytes, by: bytes,
        last: bool, job_id: int = 0, now: float = 0.0, started_at: float = 0.0,
    ) -> Job:
        """`now`: a live hand-out's time; `started_at`: a replayed one's, as its record says;
        `handed`: the record's ` AT <t>` (or b""); `by`: its ` BY <name>` (or b"")."""
        # _drop_ready_count and _leave_waiting without their calls while the queue and its
        # priority keep other jobs (with DONE's hoisted lookups, -950 instructions per job of a
        # GET ... COUNT batch, bench/RESULTS.md)
        if state.ready > 1:
            state.ready -= 1
        else:
            self._drop_ready_count(state)
        by_priority = state.waiting_by_priority
        count = by_priority[priority]
        if count > 1:
            by_priority[priority] = count - 1
            self._waiting -= 1
        else:
            self._leave_waiting(state, priority)
        state.running += 1
        if not job_id:
            job_id = self.next_id
        if job_id >= self.next_id:  # max() without the call
            self.next_id = job_id + 1
        if expire_at is None:
            then_done = False
        else:
            if then_done is None:
                then_done = self.expire_done_default
            heapq.heappush(self._expiries, (expire_at, job_id))
        if now:  # a live hand-out (not a replayed or replicated one): its wait is counted
            latency = state.latency or new_latency(state)  # (latency.py: settled in bulk)
            waits = latency.waits
            if not waits:  # (its first since the last settle)
                self.observed.add(latency)
            waits.append(now - entry[2])
        meta = entry[4]
        if type(meta) is int:
            attempts, history = meta + 1, None
        else:  # a job that failed before or is traced: its errors and trace stay with it
            # (solo and retry-wait end)
            attempts = meta.attempts + 1  # type: ignore[union-attr]
            history = (JobMeta(meta.attempts, meta.errors, trace=meta.trace)  # type: ignore[union-attr]
                       if meta.errors or meta.trace is not None else None)  # type: ignore[union-attr]
        # Not Job(...): CPython 3.11 runs a class's __init__ through a C slot, outside the
        # interpreter's inlined calls, and that cost more than these assignments (store_types.py).
        job = new_object(Job)
        job.queue = state
        job.priority = priority
        job.data = entry[0]
        job.item = entry[1]
        job.id = job_id
        job.key = entry[3]
        job.attempts = attempts
        job.history = history
        job.expire_at = expire_at
        job.lock_s = lock_s
        job.managed = managed
        job.then_done = then_done
        job.ready_at = entry[2]
        job.taken_at = now or started_at
        job.by = by
        self.running[job_id] = job
        self.keys[entry[3]] = job
        if self._ttl_marks:  # a TTL holds until the first hand-out only
            self._ttl_marks.pop(entry[3], None)
        if expire_at is None and not managed:  # records.get's hot form without its call
            self.changes.append((GET_LAST_LINE if last else GET_LINE) % (state.name.encode(), job_id, priority,
                                                                         handed, by))
        else:
            self.changes.append(records.get(state.name, job_id, priority, last, expire_at, then_done,
                                            managed, handed, by))
        return job

    def _stop_running(self, job: Job) -> QueueState:
        state = job.queue
        del self.running[job.id]
        state.running -= 1
        if not state.running:
            self.idled.append(state)
        return state

    def done(self, ids: Iterable[int], door: str | None = None, result: bytes | int | None = None,
             at: float | None = None) -> list[DoneResult]:
        """DONE: the jobs are finished, and kept a while when their queue keeps finished jobs
        (kept.py). `door`: the finishing connection's CLIENT NAME; `result`: DONE ... RESULT's
        bytes (one job), or the length of one too large to keep; `at`: a replayed record's time."""
        results = []
        found_ids = []
        keys = self.keys
        running = self.running
        index = self.kept
        watched = self.watched
        keep_total = self.keep_done_total
        live = at is None
        if at is None:  # records.micro_time(wall_clock()), inlined (a call per DONE)
            micro = int(wall_clock() * 1e6)
            now, at_text = micro / 1e6, b"%d.%06d" % divmod(micro, 1_000_000)
        else:
            now, at_text = at, records.time_text(at)
        for job_id in ids:
            job = running.pop(job_id, None)
            if job is None:
                results.append(NOT_FOUND)
                continue
            found_ids.append(job_id)
            state = job.queue  # _stop_running without its call (hot)
            state.running -= 1
            if not state.running:
                self.idled.append(state)
            key = job.key
            del keys[key]
            state.done += 1
            taken_at = job.taken_at
            if taken_at and live:  # a live DONE: its run and ready-to-done times (latency.py)
                latency = state.latency or new_latency(state)  # (none yet: handed out elsewhere)
                runs = latency.runs
                if not runs:  # (its first since the last settle)
                    self.observed.add(latency)
                runs.append(now - taken_at)
                latency.totals.append(now - job.ready_at)
            if state.keep_max:  # kept (kept.py), inlined: one tuple, untracked by the GC
                history = job.history
                entry: Kept
                if history is None:
                    entry = (key, state.name, job.priority, job.data, job.item, job.attempts, (), None,
                             job.ready_at, taken_at, now, door, result)
                else:
                    entry = (key, state.name, job.priority, job.data, job.item, job.attempts,
                             history.errors, history.trace, job.ready_at, taken_at, now, door, result)
                kept = state.kept
                if not kept:
                    if kept is None:
                        kept = state.kept = deque()
                    self.with_kept[state.name] = state
                kept.append(entry)
                replaced = index.setdefault(key, entry)  # (one lookup for a key never finished)
                if replaced is not entry:  # the key finished before: that entry is stale (kept.py)
                    index[key] = entry
                    kept_jobs.mark_stale(self, replaced)
                if len(kept) - state.kept_stale > state.keep_max or len(index) > keep_total:
                    oldest = kept.popleft()
                    if index.get(oldest[0]) is oldest:
                        del index[oldest[0]]
                    else:
                        kept_jobs.drop_oldest(self, state)
            if watched and key in watched:
                self.ended.append(key)
            if job.item is None and (state.ready or state.delayed or state.running):
                results.append(_DONE_HOLDING)  # _forget has nothing to count (hot)
            else:
                item_finished = self._forget(state, job.item)
                results.append(_DONE[not (state.ready or state.delayed or state.running), item_finished])
        if found_ids:
            self.changes.append(records.done(found_ids, at_text, door, result))
        return results

    def later(
        self, ids: Iterable[int], now: float, until: float | None = None, *, replaying: bool = False,
        solo: bool = False, front: bool = False,
    ) -> list[bool]:
        """LATER: the jobs wait again and their hand-outs are taken back (not a failure);
        `solo`: each is handed out alone next time (LATER ... SOLO); `front`: they go back
        to the head of their priority in the order given, not its end (LATER ... FRONT)."""
        results = []
        found_ids = []
        delayed = until is not None and (until > now or replaying)
        front = front and not delayed
        if front:  # the last one first, so that the first ends up at the head
            ids = list(ids)[::-1]
        for job_id in ids:
            job = self.running.get(job_id)
            if job is None:
                results.append(False)
                continue
            found_ids.append(job_id)
            meta = job.meta_back(job.attempts - 1)
            if solo:
                meta = solo_meta(meta)
            self._requeue(job, now, until if delayed else None, meta, front=front)
            job.queue.later += 1
            results.append(True)
        if front:
            results.reverse()
            found_ids.reverse()
        if found_ids:
            self.changes.append(records.later(found_ids, until if delayed else None, solo, front))
        return results

    def _requeue(self, job: Job, now: float, until: float | None, meta: Meta, *, front: bool = False) -> None:
        state = self._stop_running(job)
        self._count_waiting(state, job.priority)
        if until is not None:
            self._delay(state, job.priority, job.data, job.item, until, job.key, meta)
        elif front:
            self._prepend_ready(state, job.priority, (job.data, job.item, now, job.key, meta))
        else:
            self._append_ready(state, job.priority, (job.data, job.item, now, job.key, meta))
