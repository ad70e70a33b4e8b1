"""The server's state as replication moves it: a whole snapshot replaces it (CLONE, a
replica's first sync), the primary's SYNC records are applied to it, a replica's link
starts its stream, and where it stands in the primary's history. A mixin of QueueServer,
as roles.py is: it knows the server only by the attributes below.
"""
from __future__ import annotations

import abc
import time

from queue_server.server import replay, replica_health, snapshot
from queue_server.server.errors import ReplicationApplyError
from queue_server.server.faces import Conn
from queue_server.server.journal import Journal
from queue_server.server.liveness import Upstream
from queue_server.server.persistence import DataDir
from queue_server.server.replication import Replication
from queue_server.server.settings import ServerSettings
from queue_server.server.store import Store
from queue_server.server.waiters import Waiters


class Replicated(abc.ABC):
    settings: ServerSettings
    store: Store
    waiters: Waiters
    data_dir: DataDir
    journal: Journal[Conn]
    replicas: Replication[Conn]
    following: bool
    upstream: Upstream | None

    # QueueServer's (server.py). Abstract, not empty stubs: a class without one cannot be
    # made (TypeError at start, and mypy: "Cannot instantiate abstract class").
    @abc.abstractmethod
    def flush_records(self) -> bool: ...

    @abc.abstractmethod
    def _after_change(self) -> None: ...

    @abc.abstractmethod
    def _request_flush(self) -> None: ...

    def position(self) -> int:
        """Where this server stands in the primary's history, in records: a primary's every
        record so far (those in its state); a replica's, from its last link (follower.py),
        lost or not: what it applied stays in its state until a new snapshot replaces it."""
        if self.following:
            return self.upstream.position() if self.upstream is not None else 0
        return self.journal.records + len(self.journal.pending) + len(self.store.changes)

    def link_replica(self, conn: Conn, peer: bytes, *, may_confirm: bool = True) -> None:
        """Stream the records to `conn` from now on. Records still waiting in the store (no
        replica was linked when they were made) are in the snapshot just sent, or came
        before the link: they go to the log only, never down the new link; the journal
        starts the link's stream after this turn's records so far (journal.py `link`)."""
        self._record_unreplicated()
        self.journal.link(conn)
        self.replicas.linked(conn, peer, may_confirm=may_confirm)

    def _record_unreplicated(self) -> None:
        """The store's records so far go to the log only: a SYNC record (from a primary or
        a peer) is never passed on to this server's replicas."""
        self.journal.record(self.store.drain_changes(), replicate=False)

    def replace_state(self, blob: bytes) -> bool:
        """The state becomes the snapshot `blob` (CLONE, a replica's first sync), written
        as a local snapshot with a new log after it. Raises SnapshotError, changing
        nothing, for a bad snapshot; False if the log failed (the server stops)."""
        store = snapshot.decode(
            blob, time.time(), expire_done_default=self.settings.expire_done_default,
            lock_timeouts_s=dict(self.settings.lock_timeouts_s), rng=self.store.rng,
            policies=dict(self.settings.policies), keep_done_total=self.settings.keep_done_total,
        )
        if not self.flush_records():
            return False
        store.watched = self.waiters.results  # RESULT waits go on over the new state
        self.store = store
        self.data_dir.rotate_with_snapshot(store)
        store.woken.extend(state for state in store.queues.values() if state.ready)
        return True

    def apply_replicated(self, commands: list[replay.SyncCommand]) -> None:
        """SYNC records streamed from the primary: applied and logged here, never passed on."""
        store = self.store
        now = time.time()
        try:
            for command in commands:
                reply = replay.apply(store, command, now)
                if not replica_health.applied(reply):
                    raise ReplicationApplyError(
                        f"{replica_health.describe(command)} -> {reply.strip()[:100]!r}")
        finally:  # what did apply is logged; the follower resyncs after a failure
            self._record_unreplicated()
            self._after_change()
            self._request_flush()
