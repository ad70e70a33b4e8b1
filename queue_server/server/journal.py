"""The journal: the store's changes (SYNC records) to the log, under the fsync policy, and to the replicas.

The server commits once per loop turn with the store's changes (`commit`): the turn's
records become one log frame, one fsync covers them all with fsync "always" (group
commit; replies leave only after it, held by the server), and the replicas get the same
records in the same order. While replicas are linked the server hands over each
operation's changes at once (`record`), so that records that must not be passed on (a
primary's, a peer's SYNC) are told apart; without replicas the changes wait in the store
until the commit, which keeps the hot path to one hand-over per loop turn. Errors from the log are OSError: the
server stops on them (server.py `log_failed`), since a reply must never acknowledge
what the log may not hold.

Each record reaches a replica exactly once, in order: in the snapshot it was sent when it
linked, or in the stream after it. As a Redis full resync cuts its RDB at the replication
offset the replica's buffer starts from, a link's stream starts at the point of this
turn's records where its snapshot was taken (`link`), and goes out behind its SNAPSHOT
reply; whatever writes records to the log streams them at the same moment.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from queue_server.server.cohort import Cohort, Member
from queue_server.server.liveness import HEARTBEAT_LINE
from queue_server.server.persistence import DataDir, FsyncPolicy
from queue_server.server.store import Store

log = logging.getLogger("slotmap.queue_server")


class Link(Protocol):
    """A replica's link as the journal sees it (connection.py's Connection)."""
    transport: asyncio.Transport | None
    out: list[bytes]  # replies not sent yet (its SNAPSHOT reply, held for the turn's fsync)

    def abort(self) -> None: ...


K = TypeVar("K", bound=Link)


class Journal(Generic[K]):
    def __init__(self, data_dir: DataDir, *, fsync: FsyncPolicy, replica_backlog_bytes: int) -> None:
        self.data_dir = data_dir
        self.fsync = fsync
        # fsync "always": no reply leaves before the fsync that covers its records.
        self.durable_replies = fsync == "always"
        self.cohort = Cohort() if self.durable_replies else None
        self.replica_backlog_bytes = replica_backlog_bytes
        self.links: set[K] = set()  # replication links: the records streamed to them
        self.pending: list[bytes] = []  # recorded, not written yet (read-only outside)
        self._replicated: list[bytes] = []  # this turn's records for the links
        # Links added this turn after some of its records: where their stream starts.
        self._stream_from: dict[K, int] = {}
        # Bytes written to each link after its SNAPSHOT reply (records and heartbeats): the
        # position its REPLACK confirms (replica_watch.py, sync_commit.py).
        self.sent: dict[K, int] = {}
        self.appended = 0  # bytes of records written since start (sync mode: any new ones?)
        self.records = 0  # records written since start (what a deposed primary drops)

    def link(self, conn: K) -> None:
        """Stream the records to `conn` from now on: those recorded before are in the
        snapshot it was just sent."""
        if self._replicated:
            self._stream_from[conn] = len(self._replicated)
        self.links.add(conn)
        self.sent[conn] = 0

    def unlink(self, conn: K) -> None:
        self.links.discard(conn)
        self._stream_from.pop(conn, None)
        self.sent.pop(conn, None)

    def cut_links(self, why: str) -> None:
        """Close every replication link: each replica reconnects and starts again from a
        snapshot of the state as it is now (after CLONE, no record could bring it there)."""
        for link in list(self.links):
            self.cut(link, why)

    def cut(self, link: K, why: str) -> None:
        """Close one replication link (too far behind, silent: liveness.py, a CLONE)."""
        peer = link.transport.get_extra_info("peername") if link.transport else None
        log.warning("replication link %s cut (%s): it must resync", peer, why)
        self.unlink(link)
        link.abort()

    def heartbeat(self, links: list[K]) -> None:
        """An empty line to each of `links` (nothing was streamed to them for a heartbeat)."""
        for link in links:
            self._send(link, HEARTBEAT_LINE)

    def record(self, changes: list[bytes], *, replicate: bool) -> None:
        """Take one operation's records; `replicate=False` for records that came from a
        primary or a peer's SYNC, which are never passed on."""
        self.pending += changes
        if replicate and self.links:
            self._replicated += changes

    def commit(self, changes: list[bytes]) -> bool:
        """The turn's records (those recorded, then `changes`) as one frame, streamed to
        the replicas, and with fsync "always" one fsync over all of them (requests arriving
        meanwhile form the next group). False, with nothing written, while a request of
        the cohort may still come in this turn (queue_server/server/cohort.py): commit
        again once it is read. Raises OSError from the log."""
        pending = self.pending
        pending += changes
        cohort = self.cohort
        if pending and cohort is not None and cohort.wait():
            return False
        if pending:
            chunk = b"".join(pending)
            self.records += len(pending)
            pending.clear()
            self.data_dir.append(chunk)
            self.appended += len(chunk)
        if self._replicated:  # even with nothing pending: write_and_sync may have written it
            self._stream()
        if cohort is not None:
            started = time.perf_counter()
            if self.data_dir.sync_if_needed():
                cohort.synced(time.perf_counter() - started)
        return True

    def answered(self, conns: Sequence[Member]) -> None:
        if self.cohort is not None:
            self.cohort.answered(conns, time.perf_counter())

    def write_and_sync(self, changes: list[bytes]) -> None:
        """Every record (those recorded, then `changes`) written, streamed and synced,
        whatever the policy (before a snapshot, a state replaced, shutdown): the turn's
        commit may find nothing left to write, and there may be no commit after shutdown.
        Raises OSError from the log."""
        self.pending += changes
        if self.pending:
            chunk = b"".join(self.pending)
            self.records += len(self.pending)
            self.pending.clear()
            self.data_dir.append(chunk)
            self.appended += len(chunk)
        if self._replicated:
            self._stream()
        self.data_dir.fsync_log()

    def sync_everysec(self) -> None:
        """fsync "everysec": called about once a second. Raises OSError from the log."""
        self.data_dir.sync_if_needed()

    def discard(self) -> None:
        """The log failed: what is pending is never written (the server stops)."""
        self.pending.clear()
        self._replicated.clear()
        self._stream_from.clear()

    def snapshot_in_background(self, store: Store) -> None:
        """Fork a snapshot; the log goes on in a new file (persistence.py). Raises OSError
        when the log cannot be synced or closed."""
        self.data_dir.snapshot_in_background(store)

    def _stream(self) -> None:
        """Send the records recorded for the replicas, each link from where its stream
        starts. One that lets replica_backlog_bytes pile up unread is cut off (as Redis's
        replica output buffer limit does): it reconnects and starts again from a snapshot,
        instead of this server buffering without bound."""
        replicated, stream_from = self._replicated, self._stream_from
        stream = b"".join(replicated)
        for link in list(self.links):
            transport = link.transport
            if transport is None or transport.is_closing():
                continue
            if transport.get_write_buffer_size() > self.replica_backlog_bytes:
                self.cut(link, f"{transport.get_write_buffer_size()} bytes behind")
                continue
            start = stream_from.get(link)
            records = stream if start is None else b"".join(replicated[start:])
            if records:
                self._send(link, records)
        replicated.clear()
        stream_from.clear()

    def _send(self, link: K, data: bytes) -> None:
        transport = link.transport
        if transport is None or transport.is_closing():
            return
        if link.out:  # its SNAPSHOT reply, held for the turn's fsync: the stream follows it
            link.out.append(data)
        else:
            transport.write(data)
        self.sent[link] += len(data)
