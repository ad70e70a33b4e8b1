"""The master's queue server connection, in a thread of its own: renews its live slots' locks
(TOUCH) and settles a dead slot's batch (master/settle.py: replies, DONE, LATER, FAIL).

A thread, so a queue server that is slow or failing over never stalls the master's loop
(which reaps, kills the hung and reconciles); the loop only hands work over. Renewals are
coalesced (the latest set of due ids wins); settlements wait in a bounded list, in order, and
are tried again for a while, after which the queue server's own lock expiry fails those jobs.
While the master's slots hold jobs, it also asks which jobs were cancelled (CANCELLED, every
CANCEL_POLL_S; master/cancels.py matches them to the slots that hold them).
"""
from __future__ import annotations

import codecs
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from master.settle import Done, Fail, Later, Replies, Request
from queue_server.client import QueueClient
from queue_server.client.cancels import CancelEntry
from queue_server.protocol.cancels import NO_RING
from queue_server.protocol.client_errors import ConnectionLost, OfflineError, QueueServerError
from slot.outcomes import Failure
from slot.reply_key import reply_key
from slot.wake import block_slot_signals_in_this_thread

log = logging.getLogger(__name__)

# The keeper thread's first connect resolves the server's host name, which imports the idna
# codec. A slot forked while that thread holds the codec module's import lock inherits the
# lock held by a thread that does not exist in it, and hangs for good at its own first
# connect (seen: a slot forked right after a crash, as the keeper began to settle it). So the
# codec is imported here, in the main thread, before the keeper starts.
codecs.lookup("idna")

# Requests waiting for the queue server; past this, new ones are left to lock expiry.
MAX_PENDING_FAILURES = 100_000
# How long a request is tried again while the queue server cannot be reached.
FAIL_RETRY_FOR_S = 60.0
RETRY_PAUSE_S = 0.5
# How long one round follows the primary through a failover (a refusal by a server that is
# not the primary, a lost connection: sent again to the primary found anew, issue 25); the
# renewals of a round that gave up go back and are tried again. A new primary answers
# 1.5-2 s after a kill and holds the replicated locks, renewed when a third of their time
# has passed (master/leases.py): a lock survives any failover shorter than two thirds of
# it (40 s with the default 60 s lock).
FOLLOW_S = 10.0
# How often CANCELLED is asked while slots hold jobs: a cancelled job's slot is stopped
# within this (plus a tick). One small request per master per interval, answered from the
# primary's memory; nothing is asked while no slot holds a job.
CANCEL_POLL_S = 0.5
# Cancels read but not taken by the master's loop yet (it takes them every tick).
MAX_CANCELS_WAITING = 10_000


@dataclass(frozen=True, slots=True)
class _Pending:
    request: Request
    queued_at: float


class LeaseKeeper:
    def __init__(self, connect: Callable[[], QueueClient]) -> None:
        self._connect = connect
        self._client: QueueClient | None = None
        self._lock = threading.Condition()
        self._touch: list[int] = []
        self._failures: list[_Pending] = []
        self._closing = False
        self._watching = False
        self._next_poll_at = 0.0
        self._ring, self._since = NO_RING, 0
        self._cancels: list[CancelEntry] = []
        self._polls_refused = False
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
        # Counters since start, read by the master's report.
        self.renewed = 0
        self.failed = 0

    def start(self) -> None:
        self._thread.start()

    def renew(self, ids: Sequence[int]) -> None:
        if not ids:
            return
        with self._lock:
            # Renewals not sent yet are replaced: the newer list holds every live lease due.
            self._touch = list(dict.fromkeys([*self._touch, *ids]))
            self._lock.notify()

    def watch_cancels(self, watching: bool) -> None:
        """Ask CANCELLED every CANCEL_POLL_S while `watching` (some slot holds jobs)."""
        if watching == self._watching:
            return
        with self._lock:
            self._watching = watching
            self._lock.notify()

    def take_cancels(self) -> list[CancelEntry]:
        """The cancels read since the last call (running jobs' only: lease ids)."""
        if not self._cancels:  # the common case, without the lock
            return []
        with self._lock:
            taken, self._cancels = self._cancels, []
        return taken

    def fail(self, failures: Sequence[Failure]) -> None:
        self.send([Fail(tuple(failures))])

    def send(self, requests: Sequence[Request]) -> None:
        """Settle a dead slot's batch: the requests go in this order."""
        now = time.monotonic()
        with self._lock:
            room = MAX_PENDING_FAILURES - len(self._failures)
            if room < len(requests):
                log.warning("%d requests for dead slots' jobs wait for the queue server already; "
                            "%d more are left to their lock expiry", len(self._failures),
                            len(requests) - max(room, 0))
            self._failures.extend(_Pending(r, now) for r in requests[: max(room, 0)])
            self._lock.notify()

    def close(self, timeout_s: float) -> None:
        """Send what is pending (within `timeout_s`), then stop."""
        with self._lock:
            self._closing = True
            self._lock.notify()
        self._thread.join(timeout_s)
        with self._lock:
            left = len(self._failures)
        if left:
            log.warning("master stopping with %d dead slots' jobs not failed; they come back "
                        "when their lock expires", left)

    def _run(self) -> None:
        block_slot_signals_in_this_thread()
        while True:
            with self._lock:
                while not (self._touch or self._failures or self._closing or self._poll_due()):
                    self._lock.wait(self._poll_wait())
                if self._closing and not self._failures:
                    break
                touch, self._touch = self._touch, []
                failures, self._failures = self._failures, []
            try:
                if self._poll_due():
                    self._poll_cancels()
                left = self._send(touch, failures)
            except Exception:  # thread boundary: the keeper must outlive any bug in one round
                log.exception("lease keeper: a round failed; the next renewal tries again")
                left = failures
            if left:
                self._requeue(left)
                time.sleep(RETRY_PAUSE_S)
        self._drop()

    def _send(self, touch: list[int], failures: list[_Pending]) -> list[_Pending]:
        """TOUCH then FAIL, each following the primary for FOLLOW_S; returns the failures to
        try again (the renewals not sent go back too: a failover must not expire a lock)."""
        sent = 0
        renewed = False
        until = time.monotonic() + FOLLOW_S
        try:
            client = self._ready()
            if touch:
                self.renewed += sum(client.touch(*touch, until=until))
            renewed = True
            for pending in failures:
                self._send_one(client, pending.request, until)
                sent += 1
        except (QueueServerError, OSError) as exc:
            self._drop()
            self.failed += sent
            if not renewed and touch:
                self.renew(touch)
                if not failures:
                    time.sleep(RETRY_PAUSE_S)  # else _run pauses before the next round
            now = time.monotonic()
            left = [p for p in failures[sent:] if now - p.queued_at < FAIL_RETRY_FOR_S]
            log.warning("lease keeper: queue server unavailable (%s); %d renewals and %d failures "
                        "are tried again, %d left to lock expiry", exc, 0 if renewed else len(touch),
                        len(left), len(failures) - sent - len(left))
            return left
        self.failed += sent
        return []

    def _poll_due(self) -> bool:
        return self._watching and not self._polls_refused and time.monotonic() >= self._next_poll_at

    def _poll_wait(self) -> float | None:
        if not self._watching or self._polls_refused:
            return None
        return max(0.0, self._next_poll_at - time.monotonic())

    def _poll_cancels(self) -> None:
        """One CANCELLED. Trouble waits for the next poll (the renewals' path reconnects); a
        server without CANCELLED (400) is not asked again: its cancels stop no slot."""
        self._next_poll_at = time.monotonic() + CANCEL_POLL_S
        try:
            page = self._ready().cancelled(self._ring, self._since, until=time.monotonic() + CANCEL_POLL_S)
        except (ConnectionLost, OfflineError, OSError) as exc:
            self._drop()
            # Debug only: the renewals say it already, and this would say it twice a second.
            log.debug("lease keeper: CANCELLED unanswered (%s); asked again in %g s", exc, CANCEL_POLL_S)
            return
        except QueueServerError as exc:
            if exc.code == 400:
                self._polls_refused = True
                log.warning("the queue server refuses CANCELLED (%s): cancelled jobs' slots are "
                            "not stopped (they finish the job; its DONE is refused)", exc)
            else:
                log.warning("lease keeper: CANCELLED refused (%s); asked again in %g s", exc, CANCEL_POLL_S)
            return
        if page.missed and self._ring == page.ring:
            log.warning("%d cancels went by unread (more than the ring holds between two reads); "
                        "their slots finish those jobs and their DONE is refused", page.missed)
        self._ring, self._since = page.ring, page.last
        running = [entry for entry in page.cancels if entry.lease]
        if running:
            with self._lock:
                self._cancels.extend(running[: max(0, MAX_CANCELS_WAITING - len(self._cancels))])

    @classmethod
    def _send_one(cls, client: QueueClient, request: Request, until: float) -> None:
        """One request. Connection trouble raises (it is tried again); a refusal is final."""
        if isinstance(request, Fail):
            cls._fail_all(client, list(request.failures), until)
            return
        try:
            match request:
                case Replies():
                    cls._reply_all(client, request, until)
                case Done(ids):
                    results = client.done(*ids, until=until)
                    gone = [i for i, result in zip(ids, results, strict=True) if not result.found]
                    if gone:
                        log.info("DONE %s: no longer running (acknowledged before the slot died?)", gone)
                case Later(ids, delay_s, solo, front):
                    client.later(*ids, delay_s=delay_s, solo=solo, front=front, until=until)
        except (ConnectionLost, OfflineError):
            raise
        except QueueServerError as exc:
            log.warning("%s refused (%s); those jobs come back when their lock expires", request, exc)

    @classmethod
    def _reply_all(cls, client: QueueClient, request: Replies, until: float) -> None:
        """Each reply under the key the dead slot's PUT named (slot/reply_key.py). One the
        queue server has under it, waiting, running or finished and kept (a caller took it),
        was sent by the slot before it died: not sent again. Else the PUT, whose key makes
        a resend (this keeper's, after a lost connection) no second job."""
        for reply in request.replies:
            key = reply_key(request.queue, reply.job_id, reply.item) if request.keyed else None
            if key is not None and cls._has_job(client, key, until):
                log.info("reply %s to %s: sent by its slot before it died", key, reply.item)
                continue
            client.put(request.queue, reply.data, item=reply.item, ttl_s=request.ttl_s, key=key,
                       until=until)

    @staticmethod
    def _has_job(client: QueueClient, key: str, until: float) -> bool:
        """JOB <key>; a refusal (never seen from a server that takes keys) is logged, and
        counts as no job: the reply is sent, its key still stopping a second one waiting."""
        try:
            return client.job(key, until=until) is not None
        except (ConnectionLost, OfflineError):
            raise
        except QueueServerError as exc:
            log.warning("JOB %s refused (%s): the reply is sent without knowing whether its "
                        "slot sent it", key, exc)
            return False

    @staticmethod
    def _fail_all(client: QueueClient, failures: list[Failure], until: float) -> None:
        """The FAILs pipelined. Connection trouble raises (they are tried again); a refusal
        is final: the queue server's lock expiry is left to fail those jobs."""
        try:
            results = client.fail_many(failures, until=until)
        except (ConnectionLost, OfflineError):
            raise
        except QueueServerError as exc:
            log.warning("FAIL of %d jobs refused (%s); those not failed come back when their "
                        "lock expires", len(failures), exc)
            return
        gone = [f.id for f, result in zip(failures, results, strict=True) if result is None]
        if gone:
            # Acknowledged just before the slot died, or their lock already expired.
            log.info("FAIL %s: no longer running", gone)

    def _requeue(self, left: list[_Pending]) -> None:
        with self._lock:
            self._failures[:0] = left

    def _ready(self) -> QueueClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
