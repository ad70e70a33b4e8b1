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
    def take_out(self) -> bytes: ...


@dataclass(frozen=True)
class SyncSettings:
    replicate: Mode = "async"
    min_sync_replicas: int = 1
    sync_timeout_s: float = 2.0
    sync_fallback: Fallback = "refuse"


class Replication(Generic[L]):
    def __init__(self, stream: Stream[L], settings: SyncSettings,
                 answered: Callable[[Sequence[HeldConn]], None]) -> None:
        self.sync = (SyncCommit(settings.min_sync_replicas, settings.sync_timeout_s,
                                settings.sync_fallback)
                     if settings.replicate == "sync" else None)
        self.watch: ReplicaWatch[L] = ReplicaWatch(stream, self.sync)
        self.stream = stream
        self._answered = answered

    @property
    def refusing(self) -> bool:
        return self.sync is not None and self.sync.state is SyncState.REFUSING

    def hold(self, dirty: Sequence[TurnConn], now: float) -> None:
        """Sync mode, after the turn's commit: its replies wait for the confirmations."""
        assert self.sync is not None
        replies: Released = [(conn, conn.take_out()) for conn in dirty]
        needs = cast(dict[Hashable, int], dict(self.stream.sent))  # L is Hashable
        self._send(self.sync.hold(needs, self.stream.appended, replies, now))

    def linked(self, link: L) -> None:
        self.watch.linked(link)

    def acked(self, link: L, confirmed_bytes: int, now: float) -> None:
        self._send(self.watch.acked(link, confirmed_bytes, now))

    def tick(self, now: float) -> None:
        self._send(self.watch.tick(now))

    def _send(self, released: Released) -> None:
        if not released:
            return
        for conn, data in released:
            conn.send_held(data)
        self._answered([conn for conn, _ in released])

    def role_reply(self, *, following: bool) -> bytes:
        """`ROLE` (PROTOCOL.md Part B): role, sync state, acknowledging links, released turns."""
        sync = self.sync
        state = "async" if sync is None else sync.describe()
        released = 0 if sync is None else sync.released_turns
        role = "replica" if following else "primary"
        return b"200 OK %s %s %d %d\r\n" % (role.encode(), state.encode(),
                                            self.watch.in_sync_links(), released)
