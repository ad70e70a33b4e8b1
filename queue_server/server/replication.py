"""The primary's replication duties beside the journal's stream: liveness of the links
(replica_watch.py) and, with `replicate = "sync"`, replies held until replicas confirm
them (sync_commit.py). The server calls in at its flush, on REPLACK and every heartbeat.

Outside the server's import circle: the server and its connections are seen through
the protocols here, never imported.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, cast

from queue_server.server.replica_watch import L, ReplicaWatch, Stream
from queue_server.server.sync_commit import Fallback, HeldConn, Released, SyncCommit, SyncState

log = logging.getLogger("slotmap.queue_server")

Mode = Literal["async", "sync"]


class TurnConn(HeldConn, Protocol):
    is_replication_link: bool

    def take_out(self) -> bytes: ...

    def flush(self) -> None: ...

    def abort(self) -> None: ...


@dataclass(frozen=True)
class SyncSettings:
    replicate: Mode = "async"
    min_sync_replicas: int = 1
    sync_timeout_s: float = 2.0
    sync_fallback: Fallback = "refuse"


class Replication(Generic[L]):
    def __init__(self, stream: Stream[L], settings: SyncSettings,
                 answered: Callable[[Sequence[HeldConn]], None],
                 acknowledging: Callable[[], bool]) -> None:
        self.sync = (SyncCommit(settings.min_sync_replicas, settings.sync_timeout_s,
                                settings.sync_fallback)
                     if settings.replicate == "sync" else None)
        self.watch: ReplicaWatch[L] = ReplicaWatch(stream, self.sync)
        self.stream = stream
        self._answered = answered
        self._acknowledging = acknowledging  # the lease (roles.py): False, nothing leaves
        self.peers: dict[L, bytes] = {}  # link -> the replica's HOST:PORT (its SNAPSHOT)

    @property
    def refusing(self) -> bool:
        return self.sync is not None and self.sync.state is SyncState.REFUSING

    def hold(self, dirty: Sequence[TurnConn], now: float) -> None:
        """Sync mode, after the turn's commit: its replies wait for the confirmations."""
        assert self.sync is not None
        replies: Released = []
        for conn in dirty:
            if conn.is_replication_link:
                conn.flush()  # a replica's SNAPSHOT reply and stream: never held
            else:
                replies.append((conn, conn.take_out()))
        needs = cast(dict[Hashable, int], dict(self.stream.sent))  # L is Hashable
        position = (self.stream.records, self.stream.appended)
        # The turn's changes passed the lease check in the server's flush already.
        self._send(self.sync.hold(needs, position, replies, now), leased=True)

    def linked(self, link: L, peer: bytes, *, may_confirm: bool = True) -> None:
        for gone in [known for known in self.peers if known not in self.stream.sent]:
            del self.peers[gone]
        self.peers[link] = peer
        self.watch.linked(link, may_confirm=may_confirm)

    def acked(self, link: L, confirmed_bytes: int, now: float, confirmed_records: int | None = None) -> None:
        self._send(self.watch.acked(link, confirmed_bytes, now, confirmed_records))

    def tick(self, now: float) -> None:
        self._send(self.watch.tick(now))

    def consent_alone(self, decided_after: float) -> None:
        """`LEASE ... ALONE`: the manager recorded that no replica is in sync (sync_commit.py
        ASKING); the held replies go now, under the lease that carried the consent."""
        if self.sync is not None:
            self._send(self.sync.consent(decided_after), leased=True)

    def _send(self, released: Released, *, leased: bool = False) -> None:
        """Send replies released now; turns held earlier only while the lease holds."""
        if not released:
            return
        if not leased and not self._acknowledging():
            for conn, _ in released:
                cast(TurnConn, conn).abort()
            return
        for conn, data in released:
            conn.send_held(data)
        self._answered([conn for conn, _ in released])

    def drop_held(self, why: str) -> None:
        """Deposed: held replies are never sent; their connections are cut."""
        if self.sync is None:
            return
        conns = self.sync.drop_all()
        if conns:
            log.warning("%s: %d connection(s) with unconfirmed replies cut", why, len(conns))
        for conn in conns:
            cast(TurnConn, conn).abort()

    def cut_links(self, why: str) -> None:
        for link in list(self.stream.sent):
            self.stream.cut(link, why)

    def unconfirmed(self) -> tuple[int, int] | None:
        """Sync mode: (records, bytes) written since the last turn a replica confirmed."""
        if self.sync is None:
            return None
        records, written = self.sync.confirmed_position
        return self.stream.records - records, self.stream.appended - written

    def sync_word(self) -> str:
        return "async" if self.sync is None else self.sync.describe()

    def lags(self, now: float) -> list[tuple[bytes, int, float, int]]:
        """Per replica: (HOST:PORT, bytes behind, seconds since its last REPLACK or -1,
        records behind or -1). Records: our count of records written (and streamed) less
        the position its last REPLACK confirmed; nothing is counted per operation."""
        found = []
        for link, peer in self.peers.items():
            sent = self.stream.sent.get(link)
            if sent is None:
                continue  # cut (gone from `peers` at the next link)
            acked = self.sync.acked.get(link, -1) if self.sync is not None else self.watch.confirmed.get(link, -1)
            heard = self.watch.heard.get(link)
            position = self.watch.confirmed_records.get(link)
            found.append((peer, max(0, sent - max(acked, 0)),
                          -1.0 if heard is None else heard.silent_for(now),
                          -1 if position is None else max(0, self.stream.records - position)))
        return found

    def replicas_reply(self, now: float) -> bytes:
        """`REPLICAS` (PROTOCOL.md Part B): `200 OK <n>` then per link `<HOST:PORT> <bytes
        behind> <seconds since its last REPLACK> <records behind>` (-1: not known yet)."""
        lags = self.lags(now)
        lines = [b"200 OK %d\r\n" % len(lags)]
        lines += [b"%s %d %.3f %d\r\n" % lag for lag in lags]
        return b"".join(lines)

    def lags_json(self, now: float) -> list[dict[str, object]]:
        """INFO's `replicas` (a primary's links)."""
        return [{"replica": peer.decode("ascii", "replace"), "behind_bytes": behind,
                 "silent_s": round(silent, 3), "behind_records": records}
                for peer, behind, silent, records in self.lags(now)]

    def role_reply(self, *, following: bool, epoch: int, lease: bytes, position: int) -> bytes:
        """`ROLE` (PROTOCOL.md Part B): role, sync state, acknowledging links, released
        turns, epoch, lease, the replicas in sync (HOST:PORT,... or -), the position in
        the primary's history (records), and the confirmations this server waits for
        before it acknowledges as primary (0: async). The last is what the manager judges
        a promotion by (manager/failover/sentinel.py): its own config may say otherwise."""
        sync = self.sync
        released = 0 if sync is None else sync.released_turns
        role = b"replica" if following else b"primary"
        in_sync = [self.peers[link] for link in self.watch.heard_links() if link in self.peers]
        if sync is not None and sync.state is not SyncState.SYNC:
            in_sync = []
        return b"200 OK %s %s %d %d %d %s %s %d %d\r\n" % (
            role, self.sync_word().encode(), self.watch.in_sync_links(), released, epoch, lease,
            b",".join(in_sync) or b"-", position, 0 if sync is None else sync.min_replicas)
