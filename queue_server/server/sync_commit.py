"""Synchronous replication's commit rule (`replicate = "sync"`): a loop turn's replies are
held after its log commit until `min_sync_replicas` replicas confirmed the stream up to it.

Each turn that has replies becomes a `Turn`: the bytes every replication link had been
sent when the turn's records were streamed (`needs`), and the replies taken out of their
connections. A replica's `REPLACK <bytes>` (sent after its own commit, under its own fsync
policy) confirms everything up to that point of its stream, so one confirmation releases
every turn it covers: group commit across the link. Turns are released in order.

No confirmation within `sync_timeout_s` (the oldest held turn is that old): with
`fallback = "refuse"` the primary is REFUSING (the server answers queue commands
`500 Offline Mode`) and keeps the held replies until a replica confirms them; with
`"async"` it releases them and goes on ALONE, loudly, until a replica confirms the latest
turn again. Pure logic: the connections are `HeldConn`s, the links any hashable key.

A managed primary (`consent_needed`) may not go ALONE on its own: what it alone holds
must not be acknowledged before the authority records that no replica is in sync
(Patroni's synchronous_mode rule), or the manager could promote a replica that lacks it.
It ASKS instead (ROLE says `asking`), keeps holding, and goes ALONE when a lease carries
the manager's consent (`LEASE ... ALONE`, roles.py), given after that record was written.
"""
from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Literal, Protocol

log = logging.getLogger("slotmap.queue_server")

Fallback = Literal["refuse", "async"]


class HeldConn(Protocol):
    held_turns: int  # this connection's turns still held (its replies keep their order)

    def send_held(self, data: bytes) -> None: ...


class SyncState(enum.Enum):
    SYNC = "sync"  # every held turn younger than sync_timeout_s
    REFUSING = "refusing"  # no confirmation in time: queue commands refused
    ALONE = "alone"  # no confirmation in time: going on without replicas (fallback async)
    ASKING = "asking"  # ... managed: replies held until the manager consents to ALONE


Released = list[tuple[HeldConn, bytes]]


@dataclass(slots=True)
class Turn:
    needs: dict[Hashable, int]
    replies: Released
    at: float
    position: tuple[int, int]  # (records, bytes) written when it was committed


@dataclass
class SyncCommit:
    min_replicas: int
    timeout_s: float
    fallback: Fallback
    state: SyncState = SyncState.SYNC
    acked: dict[Hashable, int] = field(default_factory=dict)  # link -> bytes it confirmed
    turns: deque[Turn] = field(default_factory=deque)
    last_needs: dict[Hashable, int] = field(default_factory=dict)
    last_position: tuple[int, int] = (0, 0)  # (records, bytes) written at the last turn
    confirmed_position: tuple[int, int] = (0, 0)  # ... at the last turn a replica confirmed
    released_turns: int = 0  # turns released by a confirmation (not by the fallback)
    fallbacks: int = 0  # times the fallback to async was taken
    consent_needed: bool = False  # managed: ALONE only with the manager's consent
    asking_since: float = 0.0  # monotonic s: ASKING since (a consent must be newer)

    def confirmed(self, needs: dict[Hashable, int]) -> bool:
        acked = self.acked
        count = 0
        for link, wanted in needs.items():
            if acked.get(link, -1) >= wanted:
                count += 1
        return count >= self.min_replicas

    def hold(self, needs: dict[Hashable, int], position: tuple[int, int], replies: Released,
             now: float) -> Released:
        """A committed turn's replies (`position`: records and bytes written so far);
        returns those that may go now."""
        self.last_needs = needs
        previous, self.last_position = self.last_position, position
        if self.state is SyncState.ALONE:
            return replies
        if not self.turns and self.confirmed(needs):
            self.confirmed_position = position
            return replies
        if position == previous:
            # Nothing was streamed this turn: a reply that made no change need not wait
            # for others' records, unless its own earlier replies still wait (order).
            now_free = [(conn, data) for conn, data in replies if conn.held_turns == 0]
            if len(now_free) == len(replies):
                return replies
            replies = [(conn, data) for conn, data in replies if conn.held_turns > 0]
            self._hold(Turn(needs, replies, now, position))
            return now_free
        self._hold(Turn(needs, replies, now, position))
        return []

    def _hold(self, turn: Turn) -> None:
        for conn, _ in turn.replies:
            conn.held_turns += 1
        self.turns.append(turn)

    def link_added(self, link: Hashable) -> None:
        """A new replica's snapshot holds every record so far: any confirmation from it
        covers every turn held now."""
        for turn in self.turns:
            turn.needs[link] = 0
        self.last_needs = {**self.last_needs, link: 0}

    def link_gone(self, link: Hashable) -> None:
        self.acked.pop(link, None)

    def ack(self, link: Hashable, confirmed_bytes: int) -> Released:
        """`link` confirmed its stream up to `confirmed_bytes`: the turns it now covers."""
        if confirmed_bytes > self.acked.get(link, -1):
            self.acked[link] = confirmed_bytes
        released = self._release_confirmed()
        if self.state is not SyncState.SYNC and not self.turns and self.confirmed(self.last_needs):
            log.warning("synchronous replication regained: %d replica(s) confirm again (was %s)",
                        self.min_replicas, self.state.value)
            self.state = SyncState.SYNC
        return released

    def _release_confirmed(self) -> Released:
        released: Released = []
        turns = self.turns
        while turns and self.confirmed(turns[0].needs):
            self.confirmed_position = turns[0].position
            released += self._pop()
            self.released_turns += 1
        return released

    def _pop(self) -> Released:
        turn = self.turns.popleft()
        for conn, _ in turn.replies:
            conn.held_turns -= 1
        return turn.replies

    def tick(self, now: float) -> Released:
        """Called about every HEARTBEAT_S: the timeout. Returns the replies the fallback
        releases (none with fallback "refuse")."""
        turns = self.turns
        if not turns or now - turns[0].at < self.timeout_s or self.state is not SyncState.SYNC:
            return []
        if self.fallback == "refuse":
            log.error("synchronous replication lost: no replica confirmed within %.1f s; "
                      "refusing queue commands (500 Offline Mode) until one does; %d turn(s) "
                      "of replies held", self.timeout_s, len(turns))
            self.state = SyncState.REFUSING
            return []
        if self.consent_needed:
            log.error("synchronous replication lost: no replica confirmed within %.1f s; asking "
                      "the manager to record that no replica is in sync before going on ALONE "
                      "(sync_fallback = \"async\"); %d turn(s) of replies held meanwhile",
                      self.timeout_s, len(turns))
            self.state = SyncState.ASKING
            self.asking_since = now
            return []
        return self._go_alone("")

    def consent(self, decided_after: float) -> Released:
        """The manager recorded that no replica is in sync and consents to ALONE, having
        seen this server at `decided_after` (its clock: the grant's echo). A consent based
        on a look before this request (a grant delayed in a paused manager, or a request
        since answered by a replica's confirmation) is not this request's: ignored."""
        if self.state is not SyncState.ASKING or decided_after < self.asking_since:
            return []
        return self._go_alone("; the manager recorded it first")

    def _go_alone(self, recorded: str) -> Released:
        log.error("synchronous replication lost: no replica confirmed within %.1f s; going on "
                  "ALONE (sync_fallback = \"async\"): what is acknowledged now is on this "
                  "server only%s", self.timeout_s, recorded)
        self.state = SyncState.ALONE
        self.fallbacks += 1
        released: Released = []
        while self.turns:
            released += self._pop()
        return released

    def drop_all(self) -> list[HeldConn]:
        """Deposed: every held turn is dropped, never to be acknowledged. Its fallback ends
        too: promoted again later, it must not start ALONE (or ASKING with a consent of
        its old term) while the record, written at that promotion, says it is in sync."""
        self.state = SyncState.SYNC
        conns = []
        while self.turns:
            conns += [conn for conn, _ in self._pop()]
        return conns

    def describe(self) -> str:
        """ROLE's <sync> word."""
        if self.state is SyncState.SYNC and self.turns:
            return "waiting"
        return self.state.value
