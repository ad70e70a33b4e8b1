"""The store's indexes and counters: where each job is, what waits in which queue at which
priority, the aggregate counts TOTAL reports, and the lookups over them; no I/O.

store_core.py's CoreStore changes them (PUT, GET, DONE, LATER, ...), always through the
counting helpers here, so that the totals stay O(1).
"""
from __future__ import annotations

import heapq
import os
import random
from collections.abc import Mapping

from queue_server.protocol.keyed import DeadJob, Key, Meta, is_retry_wait
from queue_server.protocol.retry import DEFAULT_KEEP_DONE_TOTAL, DEFAULT_POLICY, QueuePolicy
from queue_server.server import records
from queue_server.server.latency import QueueLatency
from queue_server.server.store_types import (
    LEVEL_GENS,
    Delayed,
    Entry,
    Job,
    Kept,
    Level,
    QueueState,
    Totals,
    TtlMark,
)


class StoreIndex:
    # Slots, not a dict: past 30 attributes (issue 26 brought 37) CPython 3.11 keeps an
    # instance's attributes in a dict of its own, and then no `self.<method>()` on the store
    # specializes (each PUT paid about 1,900 instructions more, callgrind: bench/RESULTS.md).
    # The subclasses add none of their own (`__slots__ = ()`).
    __slots__ = (
        "_at_option", "_at_rounded", "_at_time", "_classes", "_delayed", "_delayed_seq",
        "_expiries", "_holding", "_nonempty", "_nonempty_index", "_ttl", "_ttl_marks", "_ttl_seq",
        "_waiting", "changes", "dropped", "ended", "expire_done_default", "idled", "inherited",
        "inherited_given_back", "items", "keep_done_total", "kept", "keys", "lock_timeouts_s",
        "next_id", "next_item", "next_key", "observed", "policies", "queues", "rng", "run",
        "running", "watched", "with_dead", "with_kept", "woken",
    )

    def __init__(
        self,
        *,
        expire_done_default: bool = False,
        lock_timeouts_s: Mapping[str, float] | None = None,
        policies: Mapping[str, QueuePolicy] | None = None,
        rng: random.Random | None = None,
        keep_done_total: int = DEFAULT_KEEP_DONE_TOTAL,
    ) -> None:
        self.expire_done_default = expire_done_default
        # Finished jobs kept over all queues (kept.py): past it, each DONE drops the oldest of
        # its own queue, so a producer of 100,000 queues cannot make us keep 100,000 x
        # keep_done_max. 0: no queue keeps any.
        self.keep_done_total = keep_done_total
        self.lock_timeouts_s = dict(lock_timeouts_s or {})
        self.policies = dict(policies or {})
        self.rng = rng or random.Random()
        self.queues: dict[str, QueueState] = {}
        # Queues that have held a dead job, some maybe none now (store.py prunes it lazily).
        self.with_dead: dict[str, QueueState] = {}
        self.running: dict[int, Job] = {}
        self.items: dict[str, int] = {}
        # Every job's key -> where it is (Place). One namespace over all queues.
        self.keys: dict[Key, QueueState | Delayed | Job | DeadJob] = {}
        self.next_id = 1
        self.next_item = 1
        self.next_key = 1
        self._delayed: list[Delayed] = []
        self._delayed_seq = 0
        self._expiries: list[tuple[float, int]] = []
        # Managed leases running when this server was promoted and not renewed since: their
        # holder may never have had the hand-out's reply (it died with the old primary) or
        # lost sight of any primary meanwhile. Their expiry gives the job back uncharged.
        self.inherited: set[int] = set()
        self.inherited_given_back = 0  # the server logs each one
        # PUT ... TTL: (deadline, sequence, key, mark) and key -> its live mark (TtlMark).
        self._ttl: list[tuple[float, int, Key, TtlMark]] = []
        self._ttl_seq = 0
        self._ttl_marks: dict[Key, TtlMark] = {}
        self._nonempty: list[QueueState] = []  # queues with ready jobs, for O(1) random choice
        self._nonempty_index: dict[str, int] = {}
        self._classes = 0  # (queue, priority) pairs holding waiting jobs
        self._waiting = 0  # ready + delayed jobs
        self._holding = 0  # queues holding any job
        # SYNC records of the changes not drained yet: read-only outside (drain_changes).
        self.changes: list[bytes] = []
        # Outboxes drained by the server: queues that got ready jobs / lost their last running one.
        self.woken: list[QueueState] = []
        self.idled: list[QueueState] = []
        # Dead jobs dropped by the bounds, (queue, count, why): the server logs them.
        self.dropped: list[tuple[str, int, str]] = []
        # Finished jobs kept (kept.py): key -> the newest finished job of that key, and the
        # queues that have kept one (some maybe none now: pruned lazily).
        self.kept: dict[Key, Kept] = {}
        self.with_kept: dict[str, QueueState] = {}
        # Keys a RESULT waits on (the server's Waiters.results, shared), and the outbox of
        # those that ended (done, dead or deleted) since the server last looked (results.py).
        self.watched: Mapping[Key, object] = {}
        # The last live hand-out's clock, that time cut to microseconds and its SYNC GET
        # ` AT <t>` (store_core.py `_handed`).
        self._at_time = 0.0
        self._at_rounded = 0.0
        self._at_option = b""
        self.ended: list[Key] = []
        # The queues' latency counts with observations not yet bucketed (latency.py): the
        # housekeeping tick settles them.
        self.observed: set[QueueLatency] = set()
        # Names this store's JOBS positions (job_positions.py): a position read from another
        # store (before a restart, a CLONE, on another server) is placed by its key instead.
        self.run = os.urandom(4).hex()

    def drain_changes(self) -> list[bytes]:
        """The SYNC records of every change since the last drain, oldest first; the list is
        the caller's (the store starts a new one)."""
        changes = self.changes
        self.changes = []
        return changes

    # ------------------------------------------------------------ lookups

    def queue(self, name: str) -> QueueState:
        state = self.queues.get(name)
        if state is None:
            state = self.queues[name] = QueueState(
                name, self.lock_timeouts_s.get(name),
                self.policy(name).keep_done_max if self.keep_done_total else 0)
        return state

    def forget_queue(self, name: str) -> bool:
        """Drop a drained queue's state (drained.py): no job ready, delayed, running or
        dead. Nothing else holds it then (jobs hold their queue only while they wait or
        run, and its finished jobs while kept); it comes back, with its counters at 0, with
        its next job."""
        state = self.queues.get(name)
        if state is None or state.ready or state.delayed or state.running or state.dead or state.kept:
            return False
        del self.queues[name]
        return True

    def policy(self, name: str) -> QueuePolicy:
        return self.policies.get(name, DEFAULT_POLICY)

    def _unbury(self, dead: DeadJob) -> None:
        state = self.queues[dead.queue]
        del state.dead[dead.key]
        del self.keys[dead.key]

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
        delayed, expiries, ttl = self._delayed, self._expiries, self._ttl
        deadline: float | None
        if delayed:
            deadline = min(delayed[0][0], expiries[0][0]) if expiries else delayed[0][0]
        else:
            deadline = expiries[0][0] if expiries else None
        if ttl and (deadline is None or ttl[0][0] < deadline):
            return ttl[0][0]
        return deadline

    def ttl_at(self, key: Key) -> float | None:
        """A TTL job's deadline (not handed out yet), else None."""
        mark = self._ttl_marks.get(key) if self._ttl_marks else None
        return None if mark is None else mark[0]

    def delayed_jobs(self) -> list[Delayed]:
        """The live delayed jobs, soonest first."""
        keys = self.keys
        return sorted(entry for entry in self._delayed if keys.get(entry[6]) is entry)

    def set_counters(self, next_id: int, next_item: int, next_key: int = 1) -> None:
        self.next_id = max(self.next_id, next_id)
        self.next_item = max(self.next_item, next_item)
        self.next_key = max(self.next_key, next_key)
        self.changes.append(records.ids(self.next_id, self.next_item, self.next_key))

    def skip_ids(self, next_id: int) -> bool:
        """The next hand-out's id is at least `next_id` (a new era: lease_ids.py); False if
        it was already. Unrecorded: the ids given carry it to the log and the replicas."""
        if next_id <= self.next_id:
            return False
        self.next_id = next_id
        return True

    def new_item_name(self) -> str:
        name = f"_{self.next_item}"
        self.next_item += 1
        return name

    def state_of(self, key: Key) -> str | None:
        """ready, delayed, failed, running or dead; None for an unknown key."""
        place = self.keys.get(key)
        if place is None:
            return None
        kind = type(place)
        if kind is QueueState:
            return "ready"
        if kind is Job:
            return "running"
        if kind is DeadJob:
            return "dead"
        return "failed" if is_retry_wait(place[7]) else "delayed"  # type: ignore[index]

    def queue_of(self, key: Key) -> str | None:
        """The queue of the job holding `key` (ready, delayed, failed, running or dead); None
        for an unknown key."""
        place = self.keys.get(key)
        if place is None:
            return None
        if isinstance(place, QueueState):
            return place.name
        if isinstance(place, Job):
            return place.queue.name
        if isinstance(place, DeadJob):
            return place.queue
        return place[2]  # a Delayed tuple

    # ------------------------------------------------------------ counters

    def _enter(self, state: QueueState, priority: int) -> None:
        """A new job joins `state` as waiting (ready or delayed)."""
        if not (state.ready or state.delayed or state.running):  # holds_jobs without a call: hot
            self._holding += 1
        self._count_waiting(state, priority)

    def _count_waiting(self, state: QueueState, priority: int) -> None:
        by_priority = state.waiting_by_priority
        count = by_priority.get(priority, 0)
        if not count:
            self._classes += 1
        by_priority[priority] = count + 1
        self._waiting += 1

    def _mark_ttl(self, key: Key, deadline: float, priority: int, entry: Entry | None) -> None:
        mark: TtlMark = [deadline, priority, entry]
        self._ttl_marks[key] = mark
        self._ttl_seq += 1
        heapq.heappush(self._ttl, (deadline, self._ttl_seq, key, mark))

    def _delay(self, state: QueueState, priority: int, data: bytes, item: str | None, until: float,
               key: Key, meta: Meta) -> None:
        state.delayed += 1
        if is_retry_wait(meta):
            state.failed += 1
        self._delayed_seq += 1
        entry = (until, self._delayed_seq, state.name, priority, data, item, key, meta)
        heapq.heappush(self._delayed, entry)
        self.keys[key] = entry

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
            level = StoreIndex._new_level(state, priority)
        level.append(entry)
        level.tail += 1
        self.keys[entry[3]] = state
        if not state.ready:
            self._nonempty_index[state.name] = len(self._nonempty)
            self._nonempty.append(state)
            self.woken.append(state)
        state.ready += 1

    # Not merged into _append_ready: a `front` flag there cost PUT +84 instructions pipelined (bench/RESULTS.md).
    def _prepend_ready(self, state: QueueState, priority: int, entry: Entry) -> None:
        """_append_ready at the head of the priority (LATER ... FRONT)."""
        level = state.levels.get(priority)
        if level is None:
            level = StoreIndex._new_level(state, priority)
        level.appendleft(entry)
        self.keys[entry[3]] = state
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
        """A job leaves the waiting and running jobs for good (done, deleted, dead);
        returns True when its item is finished."""
        if not (state.ready or state.delayed or state.running):  # holds_jobs without a call: hot
            self._holding -= 1
        if item is None:
            return False
        left = self.items[item] - 1
        if left:
            self.items[item] = left
            return False
        del self.items[item]
        return True

    def _count_item(self, item: str | None) -> None:
        if item is not None:
            self.items[item] = self.items.get(item, 0) + 1

    # ------------------------------------------------------------ a queue's priority levels

    @staticmethod
    def _pop_first(state: QueueState) -> tuple[int, Entry]:
        heap = state.heap
        levels = state.levels
        while True:
            priority = -heap[0]
            level = levels.get(priority)
            if level:
                entry = level.popleft()
                if not level:
                    del levels[priority]
                if state.gone and id(entry) in state.gone:  # taken out of turn (TTL, DELETE): skipped
                    state.gone.discard(id(entry))
                    continue
                return priority, entry
            heapq.heappop(heap)
            state.in_heap.discard(priority)

    @staticmethod
    def _push_front(state: QueueState, priority: int, entry: Entry) -> None:
        """Undo _pop_first (a solo job met inside a batch waits for the next GET)."""
        level = state.levels.get(priority)
        if level is None:
            level = StoreIndex._new_level(state, priority)
        level.appendleft(entry)

    @staticmethod
    def _new_level(state: QueueState, priority: int) -> Level:
        level = Level()
        level.tail = 0
        level.gen = next(LEVEL_GENS)
        state.levels[priority] = level
        if priority not in state.in_heap:
            state.in_heap.add(priority)
            heapq.heappush(state.heap, -priority)
        return level

    @staticmethod
    def _pop_at(state: QueueState, priority: int, *, last: bool) -> Entry | None:
        level = state.levels.get(priority)
        while level:
            if last:
                entry = level.pop()
                level.tail -= 1  # (Level: `tail` is the place after the last entry)
            else:
                entry = level.popleft()
            if not level:
                del state.levels[priority]
            if state.gone and id(entry) in state.gone:  # taken out of turn (TTL, DELETE): skipped
                state.gone.discard(id(entry))
                continue
            return entry
        return None
