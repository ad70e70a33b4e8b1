"""The queue server as a JobSource for the slot loop, over the blocking QueueClient."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from queue_server.client import QueueClient, tracing
from queue_server.client.follow import WAIT_CHECK_S
from queue_server.protocol.client_errors import (
    ConnectionLost,
    OfflineError,
    QueueServerError,
    WaitWoken,
)
from queue_server.protocol.job_info import JobInfo
from queue_server.protocol.replies import Job
from slot.loop import SourceUnavailable
from slot.outcome_check import not_running
from slot.outcomes import Failure
from slot.reply_key import Reply, reply_key
from slot.wake import Waker

T = TypeVar("T")
log = logging.getLogger(__name__)
BAD_REQUEST = 400
# How long a fetch follows a failover inside the client (the new primary answers 1.5-2 s
# after a kill), polling the server list every 0.2 s, before the loop's own retry.
FETCH_FOLLOW_S = 10.0
# Ids an outcome found not running that are looked up by key (JOB), per request.
MAX_LOOKUPS = 20


class ClientSource:
    """Through a failover (issue 25): a fetch follows the primary for FETCH_FOLLOW_S, and a
    batch's replies, DONE, LATER and FAIL for one lock time from its first outcome request:
    a refusal by a server that is not the primary, a lost connection or a server gone silent
    sends them again to the primary found anew (queue_server/client/follow.py). In sync
    mode the new primary holds the hand-out and its lock, so it accepts them: no re-run,
    no attempt charged. An id then not running is looked up by its key (outcome_check.py):
    no job under it is an outcome the old primary applied and replicated before it died;
    a job under it is a lock lost, reported as before."""

    def __init__(self, client: QueueClient, waker: Waker) -> None:
        self.client = client
        self.waker = waker
        # Off after a queue server refused KEYS (one older than issue 9, during an upgrade).
        self.keys = True
        # GET ... KEYS TRACES when OpenTelemetry is installed (the job's span continues its
        # producer's trace); off after a queue server older than traces refused it.
        self.traces = tracing.enabled()
        # DONE ... RESULT; off after a queue server older than issue 26 refused it.
        self.results = True
        # The batch being acknowledged: id -> its job (key, attempt), its lock time, and
        # the deadline its outcome requests follow the primary until (set at the first).
        self._batch: dict[int, Job] = {}
        self._lock_s = 0.0
        self._outcomes_until: float | None = None

    def fetch(self, queue: str, *, count: int, lock_s: float) -> Sequence[Job] | None:
        """GETB q COUNT n EXPIRE lock KEYS: waits in the server (no polling) until a job is
        ready. KEYS gives each job's key and attempt, and makes its lease a managed one (an
        expiry counts as a failed attempt).

        None when the waker ends the wait (a stop, a retarget): the connection is dropped so
        the server hands the waiter nothing, and a reply that came with the wake is kept.
        A wait whose server stops answering (frozen) is given up within seconds, and the
        fetch goes to the primary found anew (follow.py WAIT_CHECK_S).
        """
        if self.waker.woken():
            return None
        try:
            jobs = self.client.get(queue, count=count, expire_s=lock_s, block=True, keys=self.keys,
                                   traces=self.keys and self.traces,
                                   wake_fd=self.waker.fd, until=time.monotonic() + FETCH_FOLLOW_S,
                                   check_s=WAIT_CHECK_S)
        except WaitWoken:
            self.waker.drain()
            return None
        except (ConnectionLost, OfflineError, OSError) as exc:
            raise SourceUnavailable(str(exc)) from exc
        except QueueServerError as exc:
            if self.keys and self.traces and exc.code == BAD_REQUEST:
                self.traces = False
                log.warning("the queue server refused GETB ... KEYS TRACES (%s): an older "
                            "server; jobs run in spans of their own, not their producer's", exc)
                raise SourceUnavailable(f"server refused TRACES: {exc}") from exc
            if self.keys and exc.code == BAD_REQUEST:
                self.keys = False
                log.warning("the queue server refused GETB ... KEYS (%s): an older server; jobs "
                            "run without keys and attempts, failed jobs wait for their lock time",
                            exc)
                raise SourceUnavailable(f"server refused KEYS: {exc}") from exc
            raise SourceUnavailable(f"server refused GETB: {exc}") from exc
        self._batch = {job.id: job for job in jobs}
        self._lock_s = lock_s
        self._outcomes_until = None
        return jobs

    def _until(self) -> float:
        """Until when this batch's outcome requests follow the primary: one lock time from
        the first (the master renews the lock meanwhile, on the new primary too)."""
        if self._outcomes_until is None:
            self._outcomes_until = time.monotonic() + self._lock_s
        return self._outcomes_until

    def done(self, ids: Sequence[int]) -> None:
        results = _call(self.client.done, *ids, until=self._until())
        self._not_running("DONE", [i for i, result in zip(ids, results, strict=True) if not result.found])

    def done_with_result(self, job_id: int, result: bytes, *, max_bytes: int) -> None:
        if not self.results:
            self.done([job_id])
            return
        too_large = len(result) > max_bytes
        if too_large:
            log.warning("job %d's result of %d bytes is over the queue server's max_job_bytes "
                        "(%d): not sent, not kept (the finished job says how large)", job_id, len(result), max_bytes)
        try:
            if too_large:  # else the finished job would look as if it returned nothing
                found = self.client.done_large(job_id, len(result), until=self._until()).found
            else:
                found = self.client.done_with_result(job_id, result, until=self._until()).found
        except QueueServerError as exc:
            if exc.code != BAD_REQUEST:
                raise _unavailable(exc) from exc
            if too_large:  # a server from before LARGE: it may still keep the smaller results
                log.warning("the queue server refused DONE ... LARGE (%s): an older server; job %d "
                            "is done without a word of its result", exc, job_id)
            else:
                self.results = False
                log.warning("the queue server refused DONE ... RESULT (%s): an older server; jobs "
                            "are done without their results", exc)
            self.done([job_id])
            return
        except OSError as exc:
            raise _unavailable(exc) from exc
        self._not_running("DONE", [] if found else [job_id])

    def later(self, ids: Sequence[int], *, delay_s: float | None, front: bool = False) -> None:
        if not front:
            found = _call(self.client.later, *ids, delay_s=delay_s, until=self._until())
            self._not_running("LATER", [i for i, ok in zip(ids, found, strict=True) if not ok])
            return
        try:
            found = self.client.later(*ids, delay_s=delay_s, front=True, until=self._until())
            self._not_running("LATER", [i for i, ok in zip(ids, found, strict=True) if not ok])
        except QueueServerError as exc:
            if exc.code != BAD_REQUEST:
                raise _unavailable(exc) from exc
            # Refused, the jobs would wait for their lock and be charged an attempt.
            log.warning("the queue server refused LATER ... FRONT (%s): an older server; the %d "
                        "jobs given back go to the end of their queue instead", exc, len(ids))
            _call(self.client.later, *ids, delay_s=delay_s, until=self._until())
        except OSError as exc:
            raise _unavailable(exc) from exc

    def fail(self, failures: Sequence[Failure]) -> int:
        """The FAILs pipelined: one round trip for the batch's failed jobs."""
        results = _call(self.client.fail_many, failures, until=self._until())
        self._not_running("FAIL", [one.id for one, result in zip(failures, results, strict=True)
                                   if result is None])
        return sum(result is not None and result.dead for result in results)

    def reply(self, queue: str, replies: Sequence[Reply], *, ttl_s: float | None = None) -> None:
        """Each reply under its caller's item; with `ttl_s`, deleted if not taken by then.
        Each has a key of its own (slot/reply_key.py), the same each time it is sent, by
        this slot or by the master settling its batch after its death: a reply sent again
        (to the primary found anew after a stalled primary taken for a frozen one, a
        failover) while the first one waits or runs is no second job (`EXISTS`). No key
        from a server older than KEYS (it would refuse PUT ... KEY)."""
        for reply in replies:
            key = reply_key(queue, reply.job_id, reply.item) if self.keys else None
            _call(self.client.put, queue, reply.data, item=reply.item, ttl_s=ttl_s, key=key,
                  until=self._until())

    def _not_running(self, verb: str, ids: Sequence[int]) -> None:
        """Say what became of the ids an outcome found not running (outcome_check.py): the
        first MAX_LOOKUPS each looked up by key, one line for the rest (a big batch whose
        locks all expired costs a bounded number of round trips)."""
        if len(ids) > MAX_LOOKUPS:
            log.warning("%s of %d more jobs: no longer running (their lock may have expired; not "
                        "looked up): %s", verb, len(ids) - MAX_LOOKUPS, list(ids[MAX_LOOKUPS:]))
        for job_id in ids[:MAX_LOOKUPS]:
            job = self._batch.get(job_id)
            info: JobInfo | str | None = "no key"
            if job is not None and job.key is not None:
                try:
                    info = self.client.job(job.key, until=self._until())
                except (QueueServerError, OSError) as exc:
                    info = f"the queue server could not say: {exc}"
            level, text = not_running(verb, job_id, job, info)
            log.log(level, "%s", text)


def _call(request: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return request(*args, **kwargs)
    except (QueueServerError, OSError) as exc:
        raise _unavailable(exc) from exc


def _unavailable(exc: QueueServerError | OSError) -> SourceUnavailable:
    if isinstance(exc, ConnectionLost | OfflineError | OSError):
        return SourceUnavailable(str(exc))
    # A refused acknowledgement is no reason to stop the slot: the jobs keep their lock.
    return SourceUnavailable(f"server refused: {exc}")
