"""Primary or replica, as the manager says (docs/DESIGN.md "Failover that loses nothing"):
the LEASE, PROMOTE and FOLLOW commands, the fence of a primary whose lease lapsed, and
the offline switch that sync mode and the lease drive. A mixin of QueueServer, kept out
of the server's import circle: it knows the server only by the attributes below.
"""
from __future__ import annotations

import abc
import asyncio
import logging
import math
import time
from collections.abc import Hashable, Sequence
from typing import Protocol

from queue_server.server import authority, lease_ids
from queue_server.server.authority import Term
from queue_server.server.liveness import Upstream
from queue_server.server.replication import Replication
from queue_server.server.store import Store

log = logging.getLogger("slotmap.queue_server")

NOT_PRIMARY = b"409 Not Primary\r\n"


class Cuttable(Protocol):
    def abort(self) -> None: ...


class Roles(abc.ABC):
    term: Term
    store: Store
    following: bool
    offline: bool
    replicas: Replication  # type: ignore[type-arg]  # the links and sync mode (replication.py)
    _auto_offline: bool  # offline because of sync mode or the lease, not by hand
    _follow_task: asyncio.Task[None] | None
    _replicating: bool  # server.py's flush takes the replication path
    upstream: Upstream | None  # following: the last link to the primary (follower.py)

    # QueueServer's (server.py). Abstract, not empty stubs: a class without one cannot be
    # made (TypeError at start, and mypy: "Cannot instantiate abstract class").
    @abc.abstractmethod
    def promote(self) -> None: ...

    @abc.abstractmethod
    def start_following(self, primary: tuple[str, int], promote_after_s: float) -> None: ...

    @abc.abstractmethod
    def refuse_waiters(self) -> None: ...

    # ------------------------------------------------------------ the manager's commands

    def lease(self, epoch: int, lease_ms: int, echo_ms: int, alone: bool = False) -> bytes:
        """LEASE; with ALONE it also carries the manager's consent to go on alone (the
        record says no replica is in sync), valid for a request made before `echo_ms`."""
        if self.following:
            return NOT_PRIMARY
        reply = self.term.grant(epoch, lease_ms, echo_ms, time.monotonic())
        if reply.startswith(b"200"):  # granted
            self.take_ids(lease_ids.for_epoch(self.store.next_id, epoch), f"epoch {epoch}")
        self._replicating = self._replicating or self.term.managed
        if self.replicas.sync is not None:
            self.replicas.sync.consent_needed = self.term.managed
        self.update_offline()
        if alone and reply.startswith(b"200 ") and self.term.acknowledging(time.monotonic()):
            self.replicas.consent_alone(echo_ms / 1000)
        return reply

    def promote_by_manager(self, epoch: int) -> bytes:
        if not self.term.adopt(epoch):
            return authority.stale_epoch(self.term.epoch)
        self._replicating = True
        self.take_ids(lease_ids.for_epoch(self.store.next_id, epoch), f"epoch {epoch}")
        if self.following:
            self._stop_following()
            log.warning("promoted by the manager in epoch %d", epoch)
            self.promote()
        self.update_offline()
        return authority.OK

    def follow(self, primary: tuple[str, int], epoch: int) -> bytes:
        """FOLLOW: from now on a replica of `primary`. A deposed primary drops whatever no
        replica confirmed: its state is replaced by the new primary's snapshot (its history
        rewound to the new primary's, as pg_rewind does); it says how much that was."""
        if not self.term.adopt(epoch):
            return authority.stale_epoch(self.term.epoch)
        if not self.following:
            self._log_rewind(primary, epoch)
            self.replicas.drop_held(f"deposed: following {primary[0]}:{primary[1]}")
            # Its own replicas hold its history: they start again from the new primary.
            self.replicas.cut_links(f"deposed in epoch {epoch}")
        self._stop_following()
        # Another primary's history from now on: the position of the link to the old one
        # (kept after its loss for the sentinel's comparison) counts in a history no longer
        # ours, and could outrank the new primary's replicas until our snapshot came.
        self.upstream = None
        self.following = True
        self.offline = True
        self._auto_offline = False
        self.refuse_waiters()  # only the primary hands out: nobody waits here for a job
        self.start_following(primary, math.inf)  # the manager alone promotes now
        return authority.OK

    def _log_rewind(self, primary: tuple[str, int], epoch: int) -> None:
        dropped = self.replicas.unconfirmed()
        if dropped is None:
            log.warning("deposed in epoch %d: following %s:%d; async replication: records it "
                        "did not receive are dropped with this state (its snapshot replaces it)",
                        epoch, *primary)
        else:
            log.warning("deposed in epoch %d: following %s:%d; rewinding to its history drops "
                        "%d record(s) (%d bytes) no replica confirmed (never acknowledged)",
                        epoch, *primary, dropped[0], dropped[1])

    def take_ids(self, next_id: int, why: str) -> None:
        """Lease ids go on from `next_id` (a new era, lease_ids.py). No record: each id
        given reaches the log and the replicas in its SYNC GET, and a reply to LEASE or
        PROMOTE that made no record is not held for the replicas (sync_commit.py)."""
        if self.store.skip_ids(next_id):
            log.info("lease ids go on from %d (%s)", next_id, why)

    def _stop_following(self) -> None:
        task, self._follow_task = self._follow_task, None
        if task is not None:
            task.cancel()

    # ------------------------------------------------------------ acknowledging or not

    def acknowledging(self) -> bool:
        """May replies that acknowledge a change leave now (the lease, if managed)?"""
        return self.following or self.term.acknowledging(time.monotonic())

    def fence(self, conns: Sequence[Cuttable]) -> None:
        """The lease lapsed after this turn's changes were made: they may be a deposed
        primary's, so none is acknowledged; the clients retry on the primary."""
        log.error("lease lapsed (epoch %d): %d connection(s) cut without their replies; "
                  "acknowledging nothing until the manager renews it", self.term.epoch, len(conns))
        for conn in conns:
            conn.abort()
        self.update_offline()

    def update_offline(self) -> None:
        """Offline while no replica confirms in time (sync_fallback "refuse") or the lease
        lapsed; online again once both are well. An OFFLINE by hand or a replica's
        following is left alone."""
        if self.following:
            return
        now = time.monotonic()
        want = self.replicas.refusing or not self.term.acknowledging(now)
        if want != self._auto_offline:
            self._auto_offline = want
            self.offline = want
            if want:
                self.refuse_waiters()
            log.warning("queue commands %s (lease %s, sync %s)",
                        "refused" if want else "served again",
                        self.term.lease_word(now).decode(), self.replicas.sync_word())

    # ------------------------------------------------------------ heartbeats and confirmations

    def replica_acked(self, conn: Hashable, confirmed_bytes: int, confirmed_records: int | None) -> None:
        """REPLACK on a replication link: its heartbeat, and in sync mode a confirmation."""
        self.replicas.acked(conn, confirmed_bytes, time.monotonic(), confirmed_records)
        self.update_offline()

    def replication_tick(self) -> None:
        """Every HEARTBEAT_S (housekeeping): heartbeats, silent links, the sync timeout,
        the lease."""
        self.replicas.tick(time.monotonic())
        self.update_offline()
