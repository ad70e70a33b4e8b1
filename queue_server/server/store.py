"""The queue state the server runs on: store_core's queues and hand-outs, plus what happens
to jobs that fail (backoff, dead jobs and their bounds), TOUCH, RETRY and DELETE; no I/O."""
from __future__ import annotations

import heapq
from collections.abc import Iterable

from queue_server.protocol.keyed import (
    DeadJob,
    Errors,
    JobMeta,
    Key,
    Meta,
    cap_error,
    is_retry_wait,
    push_error,
)
from queue_server.server import records
from queue_server.server.kept import KeptJobs
from queue_server.server.store_replay import ReplayedStore
from queue_server.server.store_types import (
    DEATHS,
    NOT_FOUND,
    Delayed,
    DoneResult,
    Entry,
    Job,
    QueueState,
    Totals,
    TtlMark,
    count_door,
)

EXPIRED_DOOR = "expired"  # who finished a job whose lock ran out with THEN DONE

__all__ = ["NOT_FOUND", "Delayed", "DoneResult", "Entry", "Job", "QueueState", "Store", "Totals"]


class Store(KeptJobs, ReplayedStore):
    __slots__ = ()  # store_index.py StoreIndex has them all

    def fire_due(self, now: float) -> None:
        """Activate delayed jobs and expire running jobs whose time has come."""
        if self._delayed and self._delayed[0][0] <= now:
            self._activate_until(now, now)
            self.changes.append(records.wake(now))
        expiries = self._expiries
        while expiries and expiries[0][0] <= now:
            expire_at, job_id = heapq.heappop(expiries)
            expired = self.running.get(job_id)
            if expired is None or expired.expire_at != expire_at:
                continue  # finished or re-locked since: a stale entry
            expired.queue.expired += 1
            if job_id in self.inherited:  # nobody renewed it since the failover: not its fault
                self.inherited.discard(job_id)
                self.later((job_id,), now, front=True)
                self.inherited_given_back += 1
            elif expired.managed:  # a managed lease: its expiry is a failed attempt
                lock = expired.lock_s if expired.lock_s is not None else 0.0
                # Rounded: a promoted replica knows the lock as a deadline less its record's
                # time, so a 1 s lock read "0.999557 s".
                self.fail(job_id, b"lock expired after %g s" % round(lock, 2), now)
            elif expired.then_done:  # finished by its lock (EXPIRE ... THEN DONE), kept as any
                self.done((job_id,), EXPIRED_DOOR, at=now)
            else:
                self._requeue(expired, now, None, expired.meta_back(expired.attempts - 1))
                self.changes.append(records.later((job_id,), None))
        if self._ttl and self._ttl[0][0] <= now:
            self._expire_ttls(now)
        if self.dead_queues_due(now):
            self.prune_dead(now)

    def _expire_ttls(self, now: float) -> None:
        """PUT ... TTL: jobs not handed out by their deadline are deleted (SYNC TTL)."""
        heap, marks = self._ttl, self._ttl_marks
        by_queue: dict[str, list[Key]] = {}
        while heap and heap[0][0] <= now:
            _deadline, _seq, key, mark = heapq.heappop(heap)
            if marks.get(key) is mark:  # else handed out or deleted since: a stale entry
                by_queue.setdefault(self._drop_ttl_job(key, mark), []).append(key)
        for name, keys in by_queue.items():
            self._record_keyed(b"TTL", name, keys)

    def _drop_ttl_job(self, key: Key, mark: TtlMark) -> str:
        """Delete a waiting TTL job; returns its queue's name. O(1) when it stands first in
        its level (the usual case: one TTL per queue), else its entry is skipped when reached."""
        del self._ttl_marks[key]
        place = self.keys[key]
        if type(place) is QueueState:
            state, priority, entry = place, mark[1], mark[2]
            state.take_out_ready(priority, entry)
            del self.keys[key]
            self._drop_ready_count(state)
            self._leave_waiting(state, priority)
            self._forget(state, entry[1])
        else:  # still delayed (a replayed record may come before its WAKE)
            state = self.queues[place[2]]  # type: ignore[index]
            self._undelay(place)  # type: ignore[arg-type]
            self._forget(state, place[5])  # type: ignore[index]
        state.ttl_expired += 1
        return state.name

    def drop_ttl(self, name: str, keys: Iterable[Key]) -> None:
        """Replay of SYNC TTL: the jobs whose TTL ran out on the primary."""
        done = []
        for key in keys:
            mark = self._ttl_marks.get(key)
            if mark is not None and self._drop_ttl_job(key, mark) == name:
                done.append(key)
        self._record_keyed(b"TTL", name, done)

    def fail(
        self, job_id: int, error: bytes, now: float, *, delay_s: float | None = None,
        dead: bool = False, solo: bool = False, until: float | None = None,
        replaying: bool = False,
    ) -> float | bool | None:
        """FAIL a running job: False when `job_id` is not running; None when it is dead now;
        else the unix time of its next run. `until` (a replayed record) is that time as the
        primary decided it."""
        job = self.running.get(job_id)
        if job is None:
            return False
        # A replayed error was capped by the primary (a second cap would cut its marker).
        text = error.decode("utf-8", "replace") if replaying else cap_error(error)
        state = job.queue
        state.failed_total += 1
        if job.taken_at and state.latency is not None:  # a live failure: counted by error type
            state.latency.count_error(text)
        policy = self.policy(state.name).retry
        if until is None and not dead:
            if delay_s is not None:  # the client's own policy decided (a handler's override)
                until = now + delay_s
            elif not policy.is_exhausted(job.attempts):
                until = now + policy.delay_s(job.attempts, self.rng)
        errors = push_error(job.history.errors if job.history else (), (now, job.attempts, text),
                            self.policy(state.name).errors_kept)
        if until is None or dead:
            self.changes.append(records.fail(job_id, now, None, solo, text))
            self._bury(job, errors, now, replaying=replaying)
            return None
        self.changes.append(records.fail(job_id, now, until, solo, text))
        # A replay passes the record's own time as `now`, so `until > now` is the primary's
        # decision again (a FAIL with DELAY 0 made the job ready at once).
        meta = JobMeta(job.attempts, errors, solo, retry_wait=until > now,
                       trace=job.history.trace if job.history else None)
        self._requeue(job, now, until if until > now else None, meta)
        return until

    def _bury(self, job: Job, errors: Errors, now: float, *, replaying: bool) -> None:
        state = self._stop_running(job)
        self._forget(state, job.item)
        dead = DeadJob(job.key, state.name, job.priority, job.data, job.item, job.attempts,
                       errors, now, job.history.trace if job.history else None, next(DEATHS))
        state.dead[job.key] = dead
        self.with_dead[state.name] = state
        self.keys[job.key] = dead
        state.dead_total += 1
        if self.watched and job.key in self.watched:
            self.ended.append(job.key)
        if not replaying:
            self._bound_dead(state, now)

    def _bound_dead(self, state: QueueState, now: float) -> None:
        """Drop the oldest dead jobs past dead_max, then those older than dead_max_age_s
        (recorded as SYNC DROP; the server logs each drop as a warning)."""
        policy = self.policy(state.name)
        dead = state.dead
        dropped: list[Key] = []
        while len(dead) > policy.dead_max:
            dropped.append(next(iter(dead)))
            self._unbury(dead[dropped[-1]])
        over_count = len(dropped)
        if over_count:
            self.dropped.append((state.name, over_count, f"over dead_max {policy.dead_max}"))
        oldest_allowed = now - policy.dead_max_age_s
        while dead and next(iter(dead.values())).died_at < oldest_allowed:
            dropped.append(next(iter(dead)))
            self._unbury(dead[dropped[-1]])
        if len(dropped) > over_count:
            self.dropped.append((state.name, len(dropped) - over_count,
                                 f"older than dead_max_age_s {policy.dead_max_age_s:g}"))
        if dropped:
            state.dead_dropped += len(dropped)
            self._record_keyed(b"DROP", state.name, dropped)

    def _queues_with_dead(self) -> list[QueueState]:
        """The queues holding dead jobs: `with_dead` less those emptied since (lazily, so
        no path that takes a dead job out has to know): not every queue, of which there
        may be 100,000, at each deadline."""
        with_dead = self.with_dead
        for name in [name for name, state in with_dead.items() if not state.dead]:
            del with_dead[name]
        return list(with_dead.values())

    def dead_queues_due(self, now: float) -> bool:
        """True when some queue holds a dead job older than its dead_max_age_s."""
        for state in self._queues_with_dead():
            if next(iter(state.dead.values())).died_at < now - self.policy(state.name).dead_max_age_s:
                return True
        return False

    def prune_dead(self, now: float) -> None:
        for state in self._queues_with_dead():
            self._bound_dead(state, now)

    def drop(self, name: str, keys: Iterable[Key]) -> None:
        """Replay of SYNC DROP: dead jobs the primary's bounds dropped."""
        state = self.queues.get(name)
        dropped = []
        for key in keys:
            place = self.keys.get(key)
            if state is not None and type(place) is DeadJob and place.queue == name:  # type: ignore[union-attr]
                self._unbury(place)  # type: ignore[arg-type]
                state.dead_dropped += 1
                dropped.append(key)
        if dropped:
            self.changes.append(records.keyed(b"DROP", name, dropped))

    def inherit_running(self) -> None:
        """Promoted: the managed leases running now were handed out by the old primary."""
        self.inherited = {job_id for job_id, job in self.running.items() if job.managed}

    def touch(self, ids: Iterable[int], now: float, expire_s: float | None = None) -> list[bool]:
        """Renew the locks of running jobs: now + `expire_s`, or the lock they were handed
        out with (their queue's lock time when they had none)."""
        results = []
        inherited = self.inherited
        for job_id in ids:
            if inherited:
                inherited.discard(job_id)  # its holder is alive and found this primary
            job = self.running.get(job_id)
            if job is None:
                results.append(False)
                continue
            lock_s = expire_s if expire_s is not None else job.lock_s
            if lock_s is None:
                lock_s = job.queue.lock_timeout_s
            if lock_s is not None:
                self._relock(job, now + lock_s)
                if expire_s is not None:
                    job.lock_s = expire_s
                self.changes.append(records.touch(job_id, now + lock_s))
            results.append(True)
        return results

    def _relock(self, job: Job, expire_at: float) -> None:
        if job.expire_at is None:
            job.then_done = self.expire_done_default
        job.expire_at = expire_at
        heapq.heappush(self._expiries, (expire_at, job.id))

    def sync_touch(self, job_id: int, until: float) -> bool:
        job = self.running.get(job_id)
        if job is None:
            return False
        self._relock(job, until)
        self.changes.append(records.touch(job_id, until))
        return True

    def retry(self, name: str, keys: Iterable[Key], now: float, door: str | None = None) -> list[bool]:
        """RETRY: a dead job becomes ready with attempts reset (its errors kept); a failed
        job waiting for its retry becomes ready now (attempts kept). `door`: who asked
        (counted per queue for STATS `retried_by`; None for a replayed record)."""
        results = []
        done: list[Key] = []
        for key in keys:
            place = self.keys.get(key)
            kind = type(place)
            if kind is DeadJob and place.queue == name:  # type: ignore[union-attr]
                self._revive(place, now)  # type: ignore[arg-type]
            elif kind is tuple and place[2] == name and is_retry_wait(place[7]):  # type: ignore[index]
                self._undelay(place)  # type: ignore[arg-type]
                _until, _seq, _name, priority, data, item, _key, meta = place  # type: ignore[misc]
                state = self.queues[name]
                self._count_waiting(state, priority)
                self._append_ready(state, priority, (data, item, now, key, meta))
            else:
                results.append(False)
                continue
            self.queues[name].retried += 1
            done.append(key)
            results.append(True)
        if done and door is not None:
            state = self.queues[name]
            state.retried_by = count_door(state.retried_by, door, len(done))
        self._record_keyed(b"RETRY", name, done)
        return results

    def _revive(self, dead: DeadJob, now: float) -> None:
        self._unbury(dead)
        state = self.queues[dead.queue]
        self._enter(state, dead.priority)
        self._count_item(dead.item)
        meta: Meta = JobMeta(0, dead.errors, trace=dead.trace) if dead.errors or dead.trace else 0
        self._append_ready(state, dead.priority, (dead.data, dead.item, now, dead.key, meta))

    def _undelay(self, entry: Delayed) -> None:
        """Take a delayed job out of waiting (its heap entry goes stale); counts stay for
        the caller to settle."""
        state = self.queues[entry[2]]
        state.delayed -= 1
        if is_retry_wait(entry[7]):
            state.failed -= 1
        self._leave_waiting(state, entry[3])
        del self.keys[entry[6]]

    def retry_all(self, name: str, which: str, now: float, door: str | None = None) -> int:
        """RETRY <q> ALL DEAD|FAILED: how many became ready."""
        state = self.queues.get(name)
        if state is None:
            return 0
        if which == "dead":
            keys = list(state.dead)
        else:
            keys = [entry[6] for entry in self.delayed_jobs() if entry[2] == name and is_retry_wait(entry[7])]
        return sum(self.retry(name, keys, now, door))

    def delete(self, name: str, keys: Iterable[Key], door: str | None = None) -> list[str]:
        """DELETE: "ok", "not_found" or "running" per key (running jobs are not deleted);
        `door` as for retry()."""
        results = []
        done: list[Key] = []
        for key in keys:
            place = self.keys.get(key)
            kind = type(place)
            state = self.queues.get(name)
            if state is None or place is None:
                results.append("not_found")
                continue
            if kind is DeadJob and place.queue == name:  # type: ignore[union-attr]
                self._unbury(place)  # type: ignore[arg-type]
            elif kind is tuple and place[2] == name:  # type: ignore[index]
                self._undelay(place)  # type: ignore[arg-type]
                self._forget(state, place[5])  # type: ignore[index]
            elif place is state:
                self._delete_ready(state, key)
            elif kind is Job and place.queue is state:  # type: ignore[union-attr]
                results.append("running")
                continue
            else:
                results.append("not_found")
                continue
            state.deleted += 1
            if self._ttl_marks:
                self._ttl_marks.pop(key, None)
            done.append(key)
            results.append("ok")
        if done and door is not None:
            state = self.queues[name]
            state.deleted_by = count_door(state.deleted_by, door, len(done))
        self.ended += [key for key in done if key in self.watched] if self.watched else ()
        self._record_keyed(b"DELETE", name, done)
        return results

    def _delete_ready(self, state: QueueState, key: Key) -> None:
        """A ready job out of its level: found in O(n), an admin's command."""
        for priority, level in state.levels.items():
            for entry in level:
                if entry[3] == key and id(entry) not in state.gone:
                    state.take_out_ready(priority, entry)
                    del self.keys[key]
                    self._drop_ready_count(state)
                    self._leave_waiting(state, priority)
                    self._forget(state, entry[1])
                    return
        raise AssertionError(f"key {key!r} indexed as ready in {state.name} but not there")

    def delete_all_dead(self, name: str, door: str | None = None) -> int:
        state = self.queues.get(name)
        if state is None:
            return 0
        return self.delete(name, list(state.dead), door).count("ok")

    def _record_keyed(self, verb: bytes, name: str, keys: list[Key]) -> None:
        for start in range(0, len(keys), records.KEYS_PER_RECORD):
            self.changes.append(records.keyed(verb, name, keys[start:start + records.KEYS_PER_RECORD]))

    def bury_record(self, name: str, priority: int, data: bytes, item: str | None, key: Key,
                    attempts: int, errors: Errors, died_at: float, trace: bytes | None = None) -> None:
        """SYNC DEAD (snapshots): a dead job as it was."""
        state = self.queue(name)
        if type(key) is int and key >= self.next_key:
            self.next_key = key + 1
        dead = DeadJob(key, name, priority, data, item, attempts, errors, died_at, trace, next(DEATHS))
        state.dead[key] = dead
        self.with_dead[name] = state
        self.keys[key] = dead
        self.changes.append(records.dead(dead))
