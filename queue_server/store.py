"""The queue state: jobs by queue and priority, running and delayed jobs, items; no I/O.

Every change appends its SYNC record to `records` (the log and replication form), so a
store rebuilt by applying those records is the same store. Costs per operation are
O(log P) for P distinct priorities of a queue and O(log n) for timed jobs; nothing
scans a queue. Time is always passed in (unix seconds).
"""
from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from queue_server import records

# A waiting job is a tuple of atomic values, `(data, item, ready_at)`: the garbage collector
# stops tracking such tuples, so a million queued jobs cost it nothing. A job becomes a
# `Job` object only while it runs.
Entry = tuple[bytes, "str | None", float]
# A delayed job: (until, sequence, queue name, priority, data, item), atomic as well.
Delayed = tuple[float, int, str, int, bytes, "str | None"]


class Job:
    """A running job under the id it was handed out with."""

    __slots__ = ("data", "expire_at", "id", "item", "priority", "queue", "then_done")

    def __init__(self, queue: QueueState, priority: int, data: bytes, item: str | None, job_id: int) -> None:
        self.queue = queue
        self.priority = priority
        self.data = data
        self.item = item
        self.id = job_id
        self.expire_at: float | None = None
        self.then_done = False


class QueueState:
    __slots__ = (
        "delayed",
        "done",
        "expired",
        "heap",
        "in_heap",
        "later",
        "levels",
        "lock_timeout_s",
        "name",
        "put",
        "ready",
        "running",
        "waiting_by_priority",
    )

    def __init__(self, name: str, lock_timeout_s: float | None) -> None:
        self.name = name
        self.levels: dict[int, deque[Entry]] = {}
        self.heap: list[int] = []  # negated priorities; may hold stale entries
        self.in_heap: set[int] = set()
        self.ready = 0
        self.delayed = 0
        self.running = 0
        self.waiting_by_priority: dict[int, int] = {}
        self.put = 0
        self.done = 0
        self.later = 0
        self.expired = 0
        self.lock_timeout_s = lock_timeout_s

    @property
    def holds_jobs(self) -> bool:
        return self.ready + self.delayed + self.running > 0

    def oldest_ready_at(self) -> float | None:
        heads = [level[0][2] for level in self.levels.values() if level]
        return min(heads) if heads else None


@dataclass(frozen=True, slots=True)
class DoneResult:
    found: bool
    queue_finished: bool = False
    item_finished: bool = False


NOT_FOUND = DoneResult(False)
_DONE = {(finq, fini): DoneResult(True, finq, fini) for finq in (False, True) for fini in (False, True)}


@dataclass(frozen=True, slots=True)
class Totals:
    queues: int
    priorities: int
    jobs: int
    running: int


class Store:
    def __init__(
        self,
        *,
        expire_done_default: bool = False,
        lock_timeouts_s: Mapping[str, float] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.expire_done_default = expire_done_default
        self.lock_timeouts_s = dict(lock_timeouts_s or {})
        self.rng = rng or random.Random()
        self.queues: dict[str, QueueState] = {}
        self.running: dict[int, Job] = {}
        self.items: dict[str, int] = {}
        self.next_id = 1
        self.next_item = 1
        self._delayed: list[Delayed] = []
        self._delayed_seq = 0
        self._expiries: list[tuple[float, int]] = []
        self._nonempty: list[QueueState] = []  # queues with ready jobs, for O(1) random choice
        self._nonempty_index: dict[str, int] = {}
        self._classes = 0  # (queue, priority) pairs holding waiting jobs
        self._waiting = 0  # ready + delayed jobs
        self._holding = 0  # queues holding any job
        self.records: list[bytes] = []
        # Outboxes drained by the server: queues that got ready jobs / lost their last running one.
        self.woken: list[QueueState] = []
        self.idled: list[QueueState] = []

    # ------------------------------------------------------------ lookups

    def queue(self, name: str) -> QueueState:
        state = self.queues.get(name)
        if state is None:
            state = self.queues[name] = QueueState(name, self.lock_timeouts_s.get(name))
        return state

    def totals(self, name: str | None = None) -> Totals:
        if name is None:
            return Totals(self._holding, self._classes, self._waiting, len(self.running))
        state = self.queues.get(name)
        if state is None:
            return Totals(0, 0, 0, 0)
        return Totals(int(state.holds_jobs), len(state.waiting_by_priority),
                      state.ready + state.delayed, state.running)

    def has_ready(self, names: tuple[str, ...] | None) -> bool:
        if names is None:
            return bool(self._nonempty)
        queues = self.queues
        return any(name in queues and queues[name].ready for name in names)

    def has_running(self, names: tuple[str, ...] | None) -> bool:
        if names is None:
            return bool(self.running)
        queues = self.queues
        return any(name in queues and queues[name].running for name in names)

    def next_deadline(self) -> float | None:
        delayed, expiries = self._delayed, self._expiries
        if delayed:
            return min(delayed[0][0], expiries[0][0]) if expiries else delayed[0][0]
        return expiries[0][0] if expiries else None

    def delayed_jobs(self) -> list[Delayed]:
        return sorted(self._delayed)

    def new_item_name(self) -> str:
        name = f"_{self.next_item}"
        self.next_item += 1
        return name

    # ------------------------------------------------------------ counters

    def _enter(self, state: QueueState, priority: int) -> None:
        """A new job joins `state` as waiting (ready or delayed)."""
        if not state.holds_jobs:
            self._holding += 1
        self._count_waiting(state, priority)

    def _count_waiting(self, state: QueueState, priority: int) -> None:
        by_priority = state.waiting_by_priority
        count = by_priority.get(priority, 0)
        if not count:
            self._classes += 1
        by_priority[priority] = count + 1
        self._waiting += 1

    def _leave_waiting(self, state: QueueState, priority: int) -> None:
        by_priority = state.waiting_by_priority
        count = by_priority[priority] - 1
        if count:
            by_priority[priority] = count
        else:
            del by_priority[priority]
            self._classes -= 1
        self._waiting -= 1

    def _append_ready(self, state: QueueState, priority: int, entry: Entry) -> None:
        level = state.levels.get(priority)
        if level is None:
            level = state.levels[priority] = deque()
            if priority not in state.in_heap:
                state.in_heap.add(priority)
                heapq.heappush(state.heap, -priority)
        level.append(entry)
        if not state.ready:
            self._nonempty_index[state.name] = len(self._nonempty)
            self._nonempty.append(state)
            self.woken.append(state)
        state.ready += 1

    def _drop_ready_count(self, state: QueueState) -> None:
        state.ready -= 1
        if not state.ready:
            index = self._nonempty_index.pop(state.name)
            last = self._nonempty.pop()
            if last is not state:
                self._nonempty[index] = last
                self._nonempty_index[last.name] = index

    def _forget(self, state: QueueState, item: str | None) -> bool:
        """A job leaves the store for good; returns True when its item is finished."""
        if not state.holds_jobs:
            self._holding -= 1
        if item is None:
            return False
        left = self.items[item] - 1
        if left:
            self.items[item] = left
            return False
        del self.items[item]
        return True

    # ------------------------------------------------------------ changes

    def put(
        self, name: str, priority: int, data: bytes, item: str | None, now: float,
        *, until: float | None = None, replaying: bool = False,
    ) -> bool:
        """Add a job; with `until` in the future it stays delayed until then.

        Returns True when the job is ready. When replaying records, a delayed job waits
        for its SYNC WAKE record whatever the clock says, so the replay hands jobs out in
        the original order.
        """
        state = self.queues.get(name) or self.queue(name)
        self._enter(state, priority)
        state.put += 1
        if item is not None:
            self.items[item] = self.items.get(item, 0) + 1
            if item[0] == "_" and item[1:].isdigit():
                self.next_item = max(self.next_item, int(item[1:]) + 1)
        if until is not None and (until > now or replaying):
            self.records.append(records.put(name, priority, data, item, until))
            self._delay(state, priority, data, item, until)
            return False
        self.records.append(records.put(name, priority, data, item, None))
        self._append_ready(state, priority, (data, item, now))
        return True

    def _delay(self, state: QueueState, priority: int, data: bytes, item: str | None, until: float) -> None:
        state.delayed += 1
        self._delayed_seq += 1
        heapq.heappush(self._delayed, (until, self._delayed_seq, state.name, priority, data, item))

    @staticmethod
    def _pop_first(state: QueueState) -> tuple[int, Entry]:
        heap = state.heap
        levels = state.levels
        while True:
            priority = -heap[0]
            level = levels.get(priority)
            if level:
                break
            heapq.heappop(heap)
            state.in_heap.discard(priority)
        entry = level.popleft()
        if not level:
            del levels[priority]
        return priority, entry

    @staticmethod
    def _pop_at(state: QueueState, priority: int, *, last: bool) -> Entry | None:
        level = state.levels.get(priority)
        if not level:
            return None
        entry = level.pop() if last else level.popleft()
        if not level:
            del state.levels[priority]
        return entry

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
        expire_s: float | None, then_done: bool | None,
    ) -> list[Job]:
        """Hand out up to `count` jobs: each batch member chosen as a GET would choose."""
        jobs: list[Job] = []
        if names is not None and len(names) == 1:  # the slot's case: one queue, one expiry
            state = self.queues.get(names[0])
            if state is None:
                return jobs
            expire_at = self._expiry(state, now, expire_s)
            for _ in range(min(count, state.ready)):
                priority, entry = self._pop_first(state)
                jobs.append(self._hand_out(state, priority, entry, expire_at, then_done, last=False))
            return jobs
        while len(jobs) < count:
            state = self.choose_queue(names)
            if state is None:
                break
            priority, entry = self._pop_first(state)
            jobs.append(self._hand_out(state, priority, entry, self._expiry(state, now, expire_s),
                                       then_done, last=False))
        return jobs

    def take_last(
        self, name: str, priority: int, now: float, expire_s: float | None, then_done: bool | None,
    ) -> Job:
        """Hand out the job just made ready in `name` (it is the last of its priority)."""
        state = self.queues[name]
        entry = self._pop_at(state, priority, last=True)
        assert entry is not None, "take_last: no ready job of that priority"
        return self._hand_out(state, priority, entry, self._expiry(state, now, expire_s),
                              then_done, last=True)

    @staticmethod
    def _expiry(state: QueueState, now: float, expire_s: float | None) -> float | None:
        if expire_s is None:
            expire_s = state.lock_timeout_s
        return None if expire_s is None else now + expire_s

    def _hand_out(
        self, state: QueueState, priority: int, entry: Entry, expire_at: float | None,
        then_done: bool | None, *, last: bool, job_id: int = 0,
    ) -> Job:
        self._drop_ready_count(state)
        self._leave_waiting(state, priority)
        state.running += 1
        if not job_id:
            job_id = self.next_id
        self.next_id = max(self.next_id, job_id + 1)
        job = Job(state, priority, entry[0], entry[1], job_id)
        self.running[job_id] = job
        job.expire_at = expire_at
        if expire_at is not None:
            job.then_done = self.expire_done_default if then_done is None else then_done
            heapq.heappush(self._expiries, (expire_at, job_id))
        self.records.append(records.get(state.name, job_id, priority, last, expire_at, job.then_done))
        return job

    def _stop_running(self, job: Job) -> QueueState:
        state = job.queue
        del self.running[job.id]
        state.running -= 1
        if not state.running:
            self.idled.append(state)
        return state

    def done(self, ids: Iterable[int]) -> list[DoneResult]:
        results = []
        found_ids = []
        for job_id in ids:
            job = self.running.get(job_id)
            if job is None:
                results.append(NOT_FOUND)
                continue
            found_ids.append(job_id)
            state = self._stop_running(job)
            state.done += 1
            item_finished = self._forget(state, job.item)
            results.append(_DONE[not state.holds_jobs, item_finished])
        if found_ids:
            self.records.append(records.done(found_ids))
        return results

    def later(
        self, ids: Iterable[int], now: float, until: float | None = None, *, replaying: bool = False,
    ) -> list[bool]:
        results = []
        found_ids = []
        delayed = until is not None and (until > now or replaying)
        for job_id in ids:
            job = self.running.get(job_id)
            if job is None:
                results.append(False)
                continue
            found_ids.append(job_id)
            self._requeue(job, now, until if delayed else None)
            job.queue.later += 1
            results.append(True)
        if found_ids:
            self.records.append(records.later(found_ids, until if delayed else None))
        return results

    def _requeue(self, job: Job, now: float, until: float | None) -> None:
        state = self._stop_running(job)
        self._count_waiting(state, job.priority)
        if until is not None:
            self._delay(state, job.priority, job.data, job.item, until)
        else:
            self._append_ready(state, job.priority, (job.data, job.item, now))

    def _activate_until(self, until: float, now: float) -> None:
        delayed = self._delayed
        while delayed and delayed[0][0] <= until:
            _until, _seq, name, priority, data, item = heapq.heappop(delayed)
            state = self.queues[name]
            state.delayed -= 1
            self._append_ready(state, priority, (data, item, now))

    def fire_due(self, now: float) -> None:
        """Activate delayed jobs and expire running jobs whose time has come."""
        if self._delayed and self._delayed[0][0] <= now:
            self._activate_until(now, now)
            self.records.append(records.wake(now))
        expiries = self._expiries
        while expiries and expiries[0][0] <= now:
            expire_at, job_id = heapq.heappop(expiries)
            expired = self.running.get(job_id)
            if expired is None or expired.expire_at != expire_at:
                continue  # finished or re-locked since: a stale entry
            expired.queue.expired += 1
            if expired.then_done:
                state = self._stop_running(expired)
                self._forget(state, expired.item)
                self.records.append(records.done((job_id,)))
            else:
                self._requeue(expired, now, None)
                self.records.append(records.later((job_id,), None))

    # ------------------------------------------------------------ replication and recovery

    def sync_get(
        self, name: str, job_id: int, priority: int, now: float,
        *, last: bool, until: float | None, then_done: bool | None,
    ) -> bool:
        """SYNC GET [LAST]: the first (last) ready job of `priority` runs under `job_id`."""
        state = self.queues.get(name)
        if state is None or job_id in self.running:
            return False
        entry = self._pop_at(state, priority, last=last)
        if entry is None:
            return False
        self._hand_out(state, priority, entry, until, then_done, last=last, job_id=job_id)
        return True

    def wake(self, until: float, now: float) -> None:
        """Replay of a SYNC WAKE: activate the delayed jobs due at `until`."""
        self._activate_until(until, now)
        self.records.append(records.wake(until))

    def set_counters(self, next_id: int, next_item: int) -> None:
        self.next_id = max(self.next_id, next_id)
        self.next_item = max(self.next_item, next_item)
        self.records.append(records.ids(self.next_id, self.next_item))

    def release_all_running(self, now: float) -> int:
        """After a crash: every job that was handed out is ready again (at least once)."""
        ids = list(self.running)
        if ids:
            self.later(ids, now)
        return len(ids)
