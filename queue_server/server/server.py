"""The queue server: executes commands on the store, group-commits the log, answers waiters."""
from __future__ import annotations

import asyncio
import logging
import math
import signal
import socket
import time
from collections.abc import Sequence

from config.periodic import TurnBoundary
from queue_server.protocol import commands as p
from queue_server.protocol import finished as fin
from queue_server.protocol import jobs as pj
from queue_server.protocol import sync_records as sr
from queue_server.server import (
    auth,
    bounds,
    lease_ids,
    queue_commands,
    replica_health,
    responses,
    results,
)
from queue_server.server.authority import Term
from queue_server.server.cancel_ring import CancelRing
from queue_server.server.connection import Connection
from queue_server.server.door import Door
from queue_server.server.faces import Conn
from queue_server.server.follower import Follower
from queue_server.server.grants import Grants
from queue_server.server.housekeeping import Housekeeping
from queue_server.server.journal import Journal
from queue_server.server.liveness import Upstream
from queue_server.server.persistence import DataDir
from queue_server.server.queue_commands import COMMANDS, CONTROL, SYNC_TYPES
from queue_server.server.recovery import RecoveryReport
from queue_server.server.replicated import Replicated
from queue_server.server.replication import Replication
from queue_server.server.roles import Roles
from queue_server.server.settings import ServerSettings
from queue_server.server.stats import StatsBuilds
from queue_server.server.store import Store
from queue_server.server.timers import TIMER_RETRY_S, Timers
from queue_server.server.waiters import Waiter, Waiters

log = logging.getLogger("slotmap.queue_server")

# CLONE carries a whole state, not a job: its block is bounded separately.
MAX_CLONE_BYTES = 64 * 1024 * 1024 * 1024
EVERYSEC_S = 1.0


class QueueServer(Roles, Replicated, Timers):
    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        # Every accepted token and what it allows (grants.py). `token` only says whether any
        # is configured (None: every connection starts authenticated) and bounds the door's
        # AUTH line by the longest; it is never compared.
        self.grants = Grants(settings.token, settings.role_tokens)
        self.token = b"*" * self.grants.longest if self.grants.required else None
        self.data_dir = DataDir(settings.data_dir, fsync=settings.fsync,
                                snapshot_log_bytes=settings.snapshot_log_bytes)
        self.journal: Journal[Conn] = Journal(self.data_dir, fsync=settings.fsync,
                               replica_backlog_bytes=settings.replica_backlog_bytes)
        self.waiters = Waiters()
        self.cancels = CancelRing()  # recent cancels, for CANCELLED (cancel_ring.py)
        self.store = self._new_store()
        self.connections: set[Conn] = set()
        self.door: Door[Conn] = Door(settings, self.token)
        self.stats_builds = StatsBuilds()  # big STATS replies in progress (stats.py)
        self.offline = False
        # A following replica fires no timer of its own: the primary's SYNC records are its
        # only changes (its jittered retries, renewed locks), so the two never drift apart.
        self.following = False
        self.replication = replica_health.ReplicationHealth()  # INFO shows it
        self._dirty: list[Conn] = []
        # Replies wait for the loop turn's end with fsync "always" (the turn's one fsync) and
        # in sync mode (the turn's one confirmation): one group per turn, not per read.
        self._durable_replies = self.journal.durable_replies or settings.sync.replicate == "sync"
        self.log_error: OSError | None = None  # the log failed: stopping, nothing more answered
        self._flush_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self.timer_turns = TurnBoundary("the expiry timer", log=log,
                                        next_turn=f"fired again in {TIMER_RETRY_S:g} s")
        self._stopped: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.housekeeping = Housekeeping(self)
        self.term = Term(managed=settings.managed)
        self.replicas: Replication[Conn] = Replication(
            self.journal, settings.sync, lambda conns: self.journal.answered(conns),  # type: ignore[arg-type]
            self.acknowledging)
        self._sync_hold = self.replicas.hold if self.replicas.sync is not None else None
        if self.replicas.sync is not None:  # managed: ALONE only with the manager's consent
            self.replicas.sync.consent_needed = settings.managed
        self._auto_offline = False  # offline for sync mode or the lease (roles.py)
        self._follow_task: asyncio.Task[None] | None = None
        self._written_at_flush = 0  # journal.appended at the last flush: were records made?
        # Anything to do after a commit besides sending replies (roles.py sets it on a LEASE).
        self._replicating = (settings.managed or settings.sync.replicate == "sync"
                             or settings.replica_of is not None)
        self.upstream: Upstream | None = None  # following: the link told of each commit (the last, once lost)

    def _new_store(self) -> Store:
        store = Store(expire_done_default=self.settings.expire_done_default,
                      lock_timeouts_s=dict(self.settings.lock_timeouts_s),
                      policies=dict(self.settings.policies),
                      keep_done_total=self.settings.keep_done_total)
        store.watched = self.waiters.results  # RESULT waits (results.py)
        return store

    # ------------------------------------------------------------ lifecycle

    def open(self, *, repair: bool = False) -> RecoveryReport:
        """Lock the data directory, recover the state, start a fresh log (before serving).
        Raises DataCorrupt for damage only `repair` may drop (queue_server/server/recovery.py)."""
        self.data_dir.lock()
        store, report = self.data_dir.recover(self._new_store, time.time(), repair=repair)
        report.log_to(log, store.totals().jobs)
        store.watched = self.waiters.results
        self.store = store
        self.data_dir.start(store)
        return report

    async def serve(self, listeners: Sequence[socket.socket] = ()) -> None:
        """Serve until shutdown, on `listeners` (bound by the caller before the data directory
        was opened: queue_server/server/listen.py) or else on settings.host:port."""
        loop = self._loop = asyncio.get_running_loop()
        self._stopped = loop.create_future()
        if listeners:
            servers = [await loop.create_server(lambda: Connection(self), sock=sock)
                       for sock in listeners]
        else:
            servers = [await loop.create_server(
                lambda: Connection(self), self.settings.host, self.settings.port,
                reuse_address=True, backlog=1024,
            )]
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.shutdown)
        # SIGHUP's default ended the server (a `systemctl reload` was an outage): every
        # setting is bound at start (docs/CONFIG.md "Reloading"), so it only says so.
        loop.add_signal_handler(signal.SIGHUP, log.warning, "SIGHUP: the queue server reloads no "
                                "settings (each takes effect at a restart: docs/CONFIG.md, Reloading); "
                                "it keeps serving")
        self.housekeeping.schedule()
        log.info("queue server %d listening on %s:%d (fsync %s)", self.settings.server_id,
                 self.settings.host, self.settings.port, self.settings.fsync)
        if self.settings.replica_of is not None:
            self.offline = True  # queue commands go to the primary while it lives
            self.following = True
            # A managed replica never promotes itself: the manager does (roles.py).
            self.start_following(self.settings.replica_of,
                                 math.inf if self.settings.managed else self.settings.promote_after_s)
        self.update_offline()  # a managed server acknowledges nothing before its first lease
        try:
            await self._stopped
        finally:
            if self._follow_task is not None:
                self._follow_task.cancel()
            for server in servers:
                server.close()
            if self.log_error is None:
                self._final_flush()
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.transport.close()
            self.data_dir.close(sync=self.log_error is None)
            if self.log_error is None:
                log.info("queue server stopped; log flushed")

    def start_following(self, primary: tuple[str, int], promote_after_s: float) -> None:
        self._replicating = True
        self._follow_task = asyncio.get_running_loop().create_task(
            Follower(self, primary, promote_after_s).run())

    def shutdown(self) -> None:
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)

    def promote(self) -> None:
        """A replica whose primary is gone: serve as the primary from now on."""
        self.offline = False
        self.following = False
        self.upstream = None  # the lost link to the old primary (kept for its position)
        log.warning("server %d is the primary now (online)", self.settings.server_id)
        if not self.term.managed:  # no epoch says whose turn it is: eras of its own
            self.take_ids(lease_ids.for_self_promotion(self.store.next_id), "self-promoted")
        self.store.inherit_running()
        # Every deadline the primary left (running jobs' locks, delayed jobs) is ours now.
        self.fire_timers_if_due()
        self._arm_timer()
        self.update_offline()

    def _final_flush(self) -> None:
        """On the way out: everything written and synced, every held reply sent (in sync
        mode none: what no replica confirmed is never acknowledged)."""
        if not self.flush_records() or self._sync_hold is not None:
            return
        held, self._dirty = self._dirty, []
        for conn in held:
            conn.flush()

    def log_failed(self, error: OSError) -> None:
        """The log could not be written or synced: what it should hold may be lost (after
        a failed fsync the kernel may drop the dirty pages, and the next fsync "succeeds"),
        so no reply that acknowledges it may leave. Every connection is cut without its
        replies, and the server stops; a restart recovers what the log really holds."""
        if self.log_error is None:
            log.critical("the log could not be written or synced (%s); %d connection(s) lose "
                         "their unsent replies; stopping", error, len(self.connections))
            self.log_error = error
        self._dirty.clear()
        self.journal.discard()
        self.store.drain_changes()
        for conn in list(self.connections):
            conn.abort()
        self.shutdown()

    def start_snapshot(self) -> None:
        """Fork a snapshot; the log goes on in a new file. One that cannot start (no
        process, memory or descriptor to spare) is logged by the data directory and tried
        again later; a log that cannot be synced or closed stops the server."""
        try:
            self.journal.snapshot_in_background(self.store)
        except OSError as error:
            self.log_failed(error)

    # ------------------------------------------------------------ output and group commit

    def mark_dirty(self, conn: Conn) -> None:
        self._dirty.append(conn)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def process_and_answer(self, conn: Conn) -> None:
        """Execute a connection's requests. Without fsync per turn there is nothing to
        group: its replies go out at once, not at the end of the loop turn."""
        if self._durable_replies:
            conn.process()
            return
        already_scheduled = self._flush_scheduled
        self._flush_scheduled = True  # replies written meanwhile schedule no flush
        try:
            conn.process()
        finally:  # even after a failure, flushing must not stay switched off
            if self._dirty or self.store.changes or self.journal.pending:
                self._flush()  # a flush scheduled before still runs and finds nothing to do
            else:
                self._flush_scheduled = already_scheduled

    def _request_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Once per loop turn: commit the turn's records (journal.py), then send the replies.

        With fsync "always" no reply leaves before the fsync that covers its records.
        """
        self._flush_scheduled = False
        if self.log_error is not None:  # stopping: a request read since gets no reply
            self.log_failed(self.log_error)
            return
        journal = self.journal
        try:
            if not journal.commit(self.store.drain_changes()):
                self._request_flush()  # a request of the cohort is in: read it, then sync
                return
        except OSError as error:
            self.log_failed(error)
            return
        if self._replicating:  # one test on the plain path (bench/hot_path_instructions.py)
            self._after_commit()
        if self._dirty:
            dirty, self._dirty = self._dirty, []
            for conn in dirty:
                conn.flush()
            if self._durable_replies:
                journal.answered(dirty)
        data_dir = self.data_dir
        if data_dir.log_bytes >= data_dir.snapshot_log_bytes and data_dir.wants_snapshot():
            self.start_snapshot()  # (the first test saves wants_snapshot's call per turn)
        self._arm_timer()

    def _after_commit(self) -> None:
        """Following, managed or in sync mode: tell the primary what is written here; cut
        a turn's changes that a primary whose lease lapsed may not acknowledge; hold the
        replies for the replicas' confirmation (what is left in _dirty goes out now)."""
        if self.upstream is not None:
            self.upstream.committed()
        appended = self.journal.appended
        if self.term.managed and appended != self._written_at_flush:
            self._written_at_flush = appended
            if self._dirty and not self.acknowledging():
                self.fence(self._dirty)
                self._dirty = []
        if self._dirty and self._sync_hold is not None and not self.following:  # a replica holds nothing
            dirty, self._dirty = self._dirty, []
            self._sync_hold(dirty, time.monotonic())

    def _after_change(self) -> None:
        """After any change of the store: answer waiters it woke; with replicas linked, hand
        its records to the journal now (else they go at the commit: journal.py)."""
        store = self.store
        if store.woken or store.idled:
            if self.waiters.count and not self.offline:
                queue_commands.settle(self)
            else:  # nobody blocked to serve (queue_commands.settle's own test, without its call)
                store.woken.clear()
                store.idled.clear()
        if store.dropped:
            self._log_dropped()
        if store.ended:
            results.answer_ended(self)
        if self.journal.links:
            self.journal.record(store.drain_changes(), replicate=True)

    def _log_dropped(self) -> None:
        dropped, self.store.dropped = self.store.dropped, []
        for queue, count, why in dropped:
            log.warning("queue %s: %d dead job(s) dropped, %s (STATS dead_dropped counts them)",
                        queue, count, why)

    # ------------------------------------------------------------ dispatch

    def max_data_bytes(self, parsed: p.Parsed) -> int:
        return MAX_CLONE_BYTES if isinstance(parsed.command, p.Clone) else self.settings.max_job_bytes

    def execute_with_data(self, conn: Conn, parsed: p.Parsed, data: bytes) -> None:
        if parsed.error is not None:
            conn.write(parsed.error.reply + b"\r\n")
            return
        command = parsed.command
        assert isinstance(command, (p.Put, sr.SyncPut, p.Clone, pj.Fail, pj.SyncFail, pj.SyncDead,
                                    sr.SyncDone, fin.DoneWithResult, fin.SyncKept))
        command.data = data
        self.execute(conn, command)

    def execute(self, conn: Conn, command: p.Command) -> None:
        """Run one command through the command table (queue_commands.py COMMANDS)."""
        kind = type(command)
        grant = conn.grant  # None: unlimited (no token configured, or the admin's)
        if grant is not None and kind not in grant.free:
            why = grant.refusal(command) or bounds.foreign_job(self.store, grant, command)
            if why is not None:
                auth.refuse(conn, why, command)
                return
        if kind is p.Done and not self.offline:  # the hot one without the table's extra call
            conn.write(responses.done_reply(self.store.done(command.ids, conn.door)))  # type: ignore[union-attr]
        else:
            COMMANDS.get(kind, CONTROL)(self, conn, command)
            if kind in SYNC_TYPES:
                self._record_unreplicated()
        self._after_change()

    def put_plain(self, conn: Conn, queue: str, priority: int, data: bytes) -> None:
        """`PUT q p len` without options: the hot path, same effects as `_put`."""
        if self.offline:
            conn.write(responses.OFFLINE)
            return
        self.store.put(queue, priority, data, None, time.time())
        conn.write(responses.OK)
        self._after_change()

    # ------------------------------------------------------------ waiters

    def answer(self, waiter: Waiter, reply: list[bytes] | bytes) -> None:
        self.waiters.remove(waiter)
        conn: Conn = waiter.conn
        if isinstance(reply, bytes):
            conn.write(reply)
        else:
            conn.write_parts(reply)
        conn.unblock()

    def refuse_waiters(self) -> None:
        """Offline or following: every blocked GETB, GETBE and PUT ... WAIT gets
        `500 Offline Mode` now (only the primary hands out jobs)."""
        for waiter in self.waiters.all():
            self.answer(waiter, responses.OFFLINE)

    def flush_records(self) -> bool:
        """Write and sync every pending record; False if the log failed (the server stops)."""
        if self.log_error is not None:
            return False
        try:
            self.journal.write_and_sync(self.store.drain_changes())
        except OSError as error:
            self.log_failed(error)
            return False
        return True

