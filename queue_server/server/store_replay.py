"""The store's side of replay and recovery: a replica's or a log's SYNC GET and SYNC WAKE
applied, and the jobs a crash left running made ready again; no I/O."""
from __future__ import annotations

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
