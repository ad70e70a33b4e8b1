"""A connection's replies: gathered per loop turn and written at the flush, held in sync
mode until replicas confirm them, bounded by the output limits, and the close that waits
for them. The base class of connection.py's Connection (its half that writes); it knows
the rest of the connection only by the attributes below.
"""
from __future__ import annotations

import abc
import asyncio
import logging

from queue_server.protocol.commands import Parsed
from queue_server.protocol.framing import FrameReader
from queue_server.server.conn_state import ConnState
from queue_server.server.faces import Server

GRACEFUL_CLOSE_S = 0.5
# Why a connection's requests are not read for now (besides a blocked wait):
HOLD_OUTPUT = "output"  # its unsent replies passed output_soft_limit_bytes: until they are flushed
# (and auth.HOLD_AUTH: a wrong AUTH, until its delayed 401 is sent)

# Module globals: `ConnState.X` costs an enum class lookup per test (bench: +4% of a PUT).
_OPEN, _QUITTING, _FAILING = ConnState.OPEN, ConnState.QUITTING, ConnState.FAILING

log = logging.getLogger("slotmap.queue_server")


class Output(abc.ABC):
    server: Server
    transport: asyncio.Transport | None
    peer: object
    state: ConnState
    reader: FrameReader
    pending: Parsed | None
    out: list[bytes]
    dirty: bool  # has replies waiting for the turn's flush
    out_bytes: int  # bytes of replies in `out` counted while pipelining (connection.py)
    hard_limit_bytes: int
    hold: str | None
    held_turns: int
    is_replication_link: bool

    # Connection's (connection.py; write passes it on as a Conn). Abstract, not empty
    # stubs: a class without one cannot be made (TypeError, and mypy says so).
    @abc.abstractmethod
    def write(self, reply: bytes) -> None: ...

    @abc.abstractmethod
    def move(self, state: ConnState) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def resume(self) -> None: ...

    @abc.abstractmethod
    def hold_reading(self, reason: str) -> None: ...

    def write_status(self, reply: bytes) -> None:
        """A reply that acknowledges no change (PING, ROLE, REPLICAS, INFO): sent now, so
        that in sync mode it never waits behind other clients' unconfirmed changes, unless
        replies before it on this connection still wait (their order)."""
        transport = self.transport
        if (self.held_turns or self.out or self.state is not _OPEN or transport is None
                or transport.is_closing()):
            self.write(reply)
        else:
            transport.write(reply)

    def flush(self) -> None:
        self.dirty = False
        if self.out_bytes:
            self._output_taken()
        transport = self.transport
        if transport is None or transport.is_closing():
            self.out.clear()
            return
        if self.out:
            data = b"".join(self.out)
            self.out.clear()
            if len(data) > self.hard_limit_bytes and not self.is_replication_link:
                self._cut_over_hard_limit(len(data))
                return
            transport.write(data)
        if self.state is not _OPEN:
            self._close_after_replies(transport)

    def _output_taken(self) -> None:
        self.out_bytes = 0
        if self.hold is HOLD_OUTPUT:  # the held replies go out now: read on after them
            self.hold = None
            asyncio.get_running_loop().call_soon(self.resume)

    def _close_after_replies(self, transport: asyncio.Transport) -> None:
        state = self.state
        if state is _FAILING:
            self.move(ConnState.DRAINING)
            if transport.can_write_eof():
                transport.write_eof()
            asyncio.get_running_loop().call_later(GRACEFUL_CLOSE_S, transport.close)
        elif state is _QUITTING:
            self.close()

    def take_out(self) -> bytes:
        """Sync mode: the turn's replies, taken to be held until replicas confirm them
        (sync_commit.py); the next turn's replies gather anew."""
        self.dirty = False
        if self.out_bytes:
            self._output_taken()
        data = b"".join(self.out)
        self.out.clear()
        return data

    def send_held(self, data: bytes) -> None:
        """Sync mode: replies the replicas confirmed (or the fallback released)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if len(data) > self.hard_limit_bytes and not self.is_replication_link:
            self._cut_over_hard_limit(len(data))
            return
        if data:
            transport.write(data)
        if self.state is not _OPEN and self.held_turns == 0 and not self.dirty:
            self._close_after_replies(transport)

    def abort(self) -> None:
        """Cut the connection at once, replies unsent."""
        self.out.clear()
        self.move(ConnState.CLOSED)
        self.pending = None
        self.reader.clear()  # never read again: its memory is free now, not at the close
        if self.transport is not None:
            self.transport.abort()

    def fail(self, reply: bytes) -> None:
        """Send a fatal error, shut down writing, drain input briefly, then close."""
        self.write(reply)
        self.move(ConnState.FAILING)
        self.pending = None
        self.reader.clear()

    def _over_soft_limit(self) -> bool:
        """Stop reading this client until its replies are flushed (then `flush` resumes it);
        past the hard limit it is cut off, unless it is a replica taking its first snapshot."""
        transport = self.transport
        unsent = self.out_bytes + (transport.get_write_buffer_size() if transport is not None else 0)
        if unsent > self.hard_limit_bytes and not self.is_replication_link:
            self._cut_over_hard_limit(unsent)
            return True
        self.hold_reading(HOLD_OUTPUT)
        return True

    def _cut_over_hard_limit(self, unsent_bytes: int) -> None:
        log.warning("client %s has %d bytes of replies unsent, over output_hard_limit_bytes "
                    "(%d): disconnected", self.peer, unsent_bytes, self.hard_limit_bytes)
        self.abort()

    def refuse(self, reply: bytes) -> None:
        """One error line, then closed (a place taken by a newer connection: door.py)."""
        transport = self.transport
        if transport is not None and self.state is _OPEN and not transport.is_closing():
            transport.write(reply)
        self.close()
