"""The door's shared budgets, across every connection: the places of clients that have not
sent the token yet, and the input bytes buffered for all clients together (one bound).

Why one total: each connection's own bounds (a line, a block, the unread input of a blocked
client) are fine alone, but 2,000 connections each holding most of a 1 MiB block took
2 GB. Here every connection's held input is charged to one account (`recharge`, called
when a read leaves bytes unread; a plain request-reply client never holds any), so:

- a data block that is not all here yet is admitted only if the whole block fits under
  `max_input_bytes`; else the client gets `503 Busy Input Full` and is closed (nothing
  of it was acknowledged, so nothing acknowledged is lost);
- past the bound, a connection whose unread input grows is not read any further until the
  total is back under LOW_WATER of it; past OVER of it, the biggest such holders are cut.
The total is then at most OVER x max_input_bytes plus one read (256 KiB) at any time.
Replies not read by their clients are bounded the same way, in total, by max_output_bytes
(checked every housekeeping tick: the biggest holders are cut).

With a token, a connection that has not authenticated yet holds a place in a second, small
pool: a new one takes the place of the oldest (never of an authenticated client), one
still unauthenticated after `auth_timeout_s` is closed, and it may send at most
`unauthenticated_input_bytes` in all before AUTH (auth.py).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Generic, Protocol, TypeVar

from queue_server.server.settings import ServerSettings

log = logging.getLogger("slotmap.queue_server")

LOW_WATER = 0.75  # paused connections read again once the total is under this share
OVER = 1.125  # past this share the biggest unadmitted holders are cut
BUSY_INPUT_FULL = b"503 Busy Input Full\r\n"


class Guest(Protocol):
    """A connection as the door sees it (connection.py's Connection; imported by none here)."""
    peer: object
    authenticated: bool
    charged: int  # its held input as charged to the total
    is_replication_link: bool
    transport: asyncio.Transport | None

    @property
    def closing(self) -> bool: ...

    def admitted_bytes(self) -> int: ...

    def set_starved(self, starved: bool) -> None: ...

    def refuse(self, reply: bytes) -> None: ...

    def fail(self, reply: bytes) -> None: ...

    def abort(self) -> None: ...


G = TypeVar("G", bound=Guest)


def sampled(count: int) -> bool:
    """Log the 1st, 2nd, 4th, 8th, ... occurrence only (an attack must not flood the log)."""
    return count & (count - 1) == 0


class Door(Generic[G]):
    def __init__(self, settings: ServerSettings, token: bytes | None) -> None:
        self.max_clients = settings.max_clients
        self.max_input_bytes = settings.max_input_bytes
        self.auth_timeout_s = settings.auth_timeout_s
        self.max_unauthenticated = settings.max_unauthenticated_clients
        # An AUTH line must always fit, whatever the token's length.
        self.unauthenticated_bytes = (max(settings.unauthenticated_input_bytes, len(token) + 64)
                                      if token is not None else 0)
        # Gs not authenticated yet -> when they opened (monotonic), oldest first.
        self.unauthenticated: dict[G, float] = {}
        self.input_bytes = 0  # held input charged, all connections together
        self.holders: set[G] = set()  # connections charged with any byte
        self.paused: set[G] = set()  # not read for the total's sake
        # Gs whose transport holds more unsent replies than its high-water mark;
        # the others hold less than 64 KiB each. Swept by `cut_unsent_output`.
        self.writing_paused: set[G] = set()
        self.max_output_bytes = settings.max_output_bytes
        self.refused = 0  # connections refused at max_clients (the log is sampled)
        self.evicted = 0
        self.refused_blocks = 0
        self.cut = 0

    # ------------------------------------------------------------ places

    def admit(self, conn: G, open_connections: set[G]) -> bool:
        """A new connection: True if it may stay. An unauthenticated one first takes the
        place of the oldest unauthenticated one when their pool or max_clients is full."""
        unauthenticated = self.unauthenticated
        if not conn.authenticated and len(unauthenticated) >= self.max_unauthenticated:
            self._evict_oldest(open_connections, "max_unauthenticated_clients")
        if len(open_connections) >= self.max_clients:
            if not unauthenticated:
                self.refused += 1
                if sampled(self.refused):
                    log.warning("connection from %s refused: max_clients (%d) connections are "
                                "open (%d refused so far)", conn.peer, self.max_clients, self.refused)
                return False
            self._evict_oldest(open_connections, "max_clients")
        if not conn.authenticated:
            unauthenticated[conn] = time.monotonic()
        return True

    def _evict_oldest(self, open_connections: set[G], why: str) -> None:
        victim = next(iter(self.unauthenticated))
        self.evicted += 1
        if sampled(self.evicted):
            log.warning("connection from %s closed unauthenticated: a newer connection took its "
                        "place (%s full; %d so far)", victim.peer, why, self.evicted)
        open_connections.discard(victim)
        self.forget(victim)
        victim.refuse(b"503 Too Many Clients\r\n")

    def authenticated(self, conn: G) -> None:
        self.unauthenticated.pop(conn, None)

    def forget(self, conn: G) -> None:
        """The connection is gone: its place and its held bytes are free."""
        self.unauthenticated.pop(conn, None)
        self.paused.discard(conn)
        self.writing_paused.discard(conn)
        if conn.charged:
            self._charge(conn, 0)
            if self.paused and self.input_bytes < self.max_input_bytes * LOW_WATER:
                self._resume_all()  # (the holders going is what frees the others)

    def expire_unauthenticated(self, now: float) -> int:
        """Close connections still unauthenticated auth_timeout_s after they opened."""
        expired = []
        for conn, opened_at in self.unauthenticated.items():
            if now - opened_at < self.auth_timeout_s:
                break  # oldest first: the rest are younger
            expired.append(conn)
        for conn in expired:
            self.forget(conn)
            if not conn.closing:  # (one already closing goes on its own)
                conn.fail(b"401 Auth Required\r\n")
        return len(expired)

    # ------------------------------------------------------------ held input

    def _charge(self, conn: G, held: int) -> None:
        self.input_bytes += held - conn.charged
        conn.charged = held
        if held:
            self.holders.add(conn)
        else:
            self.holders.discard(conn)

    def may_reserve(self, conn: G, block_bytes: int) -> bool:
        """May `conn` start reading a block of `block_bytes` not all here yet?"""
        if self.input_bytes - conn.charged + block_bytes <= self.max_input_bytes:
            return True
        self.refused_blocks += 1
        if sampled(self.refused_blocks):
            log.warning("a %d-byte block from %s refused: the input held for all clients would "
                        "pass max_input_bytes (%d; %d held; %d refused so far)", block_bytes,
                        conn.peer, self.max_input_bytes, self.input_bytes, self.refused_blocks)
        return False

    def recharge(self, conn: G, held: int, admitted: int) -> None:
        """`conn` now holds `held` unread bytes, `admitted` of them (or to come) for a
        block it was let in for."""
        before = conn.charged
        self._charge(conn, max(held, admitted))
        total, bound = self.input_bytes, self.max_input_bytes
        if total > bound and held > admitted and held > before:
            self.paused.add(conn)
            conn.set_starved(True)
            if total > bound * OVER:
                self._cut_biggest()
        elif self.paused and total < bound * LOW_WATER:
            self._resume_all()

    def _cut_biggest(self) -> None:
        """Cut the biggest holders of input beyond an admitted block until under OVER."""
        holders = sorted(self.holders, key=lambda held: held.charged - held.admitted_bytes(),
                         reverse=True)
        for conn in holders:
            if self.input_bytes <= self.max_input_bytes * OVER or conn.charged <= conn.admitted_bytes():
                break
            self.cut += 1
            log.warning("connection from %s cut: %d bytes of its input unread while the input "
                        "held for all clients passed max_input_bytes (%d; %d cut so far)",
                        conn.peer, conn.charged, self.max_input_bytes, self.cut)
            self.forget(conn)
            conn.abort()

    def cut_unsent_output(self) -> int:
        """Replies not read by their clients, all together, past max_output_bytes: cut the
        clients holding the most (never a replication link: replica_backlog_bytes bounds
        those) until under. Each client's own bound is output_hard_limit_bytes; this is the
        sum's (housekeeping, every 0.5 s). Returns the unsent bytes left."""
        held = {conn: conn.transport.get_write_buffer_size() for conn in self.writing_paused
                if conn.transport is not None and not conn.is_replication_link}
        total = sum(held.values())
        for conn in sorted(held, key=held.__getitem__, reverse=True):
            if total <= self.max_output_bytes:
                break
            total -= held[conn]
            self.cut += 1
            log.warning("connection from %s cut: %d bytes of replies unsent while the replies "
                        "unsent to all clients passed max_output_bytes (%d; %d cut so far)",
                        conn.peer, held[conn], self.max_output_bytes, self.cut)
            self.forget(conn)
            conn.abort()
        return total

    def _resume_all(self) -> None:
        paused, self.paused = self.paused, set()
        for conn in paused:
            conn.set_starved(False)
