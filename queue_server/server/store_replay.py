"""The store's side of replay and recovery: a replica's or a log's SYNC GET and SYNC WAKE
applied (delayed jobs made ready, as the timers make them live: store.py), and the jobs a
crash left running made ready again; no I/O."""
from __future__ import annotations

import heapq

from queue_server.protocol.keyed import is_retry_wait
from queue_server.server import records
from queue_server.server.store_core import CoreStore


class ReplayedStore(CoreStore):
    __slots__ = ()  # store_index.py StoreIndex has them all

    def sync_get(
        self, name: str, job_id: int, priority: int, now: float,
        *, last: bool, until: float | None, then_done: bool | None, managed: bool = False,
        at: float = 0.0, by: str | None = None,
    ) -> bool:
        """SYNC GET [LAST]: the first (last) ready job of `priority` runs under `job_id`,
        handed out at `at` to the connection named `by`."""
        state = self.queues.get(name)
        if state is None or job_id in self.running:
            return False
        entry = self._pop_at(state, priority, last=last)
        if entry is None:
            return False
        lock_s = None if until is None else max(0.0, until - now)
        by_option = b"" if by is None else b" BY " + by.encode("ascii")
        self._hand_out(state, priority, entry, until, lock_s, then_done, managed, records.at(at), by_option,
                       last=last, job_id=job_id, started_at=at)
        return True

    def wake(self, until: float, now: float) -> None:
        """Replay of a SYNC WAKE: activate the delayed jobs due at `until`."""
        self._activate_until(until, now)
        self.changes.append(records.wake(until))

    def release_all_running(self, now: float) -> int:
        """After a crash: every job that was handed out is ready again (at least once)."""
        ids = list(self.running)
        if ids:
            self.later(ids, now)
        return len(ids)

    def _activate_until(self, until: float, now: float) -> None:
        """The delayed jobs due at `until` are ready from `now` (SYNC WAKE, or the timers)."""
        delayed = self._delayed
        keys = self.keys
        while delayed and delayed[0][0] <= until:
            entry = heapq.heappop(delayed)
            _until, _seq, name, priority, data, item, key, meta = entry
            if keys.get(key) is not entry:
                continue  # taken out by RETRY or DELETE meanwhile
            state = self.queues[name]
            state.delayed -= 1
            if is_retry_wait(meta):
                state.failed -= 1
            ready = (data, item, now, key, meta)
            self._append_ready(state, priority, ready)
            if self._ttl_marks:
                mark = self._ttl_marks.get(key)
                if mark is not None:
                    mark[2] = ready
