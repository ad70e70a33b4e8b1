"""One client connection: framing (lines, data blocks), flow control; its replies are
written by its base class (conn_output.py)."""
from __future__ import annotations

import asyncio
import logging
import re
import time

from queue_server.protocol.commands import (
    INT64_MAX,
    INT64_MIN,
    MAX_LINE_BYTES,
    Parsed,
    parse_line,
)
from queue_server.protocol.errors import ProtocolError
from queue_server.protocol.framing import FrameReader, LineTooLong
from queue_server.server import auth, door, guard, peer, responses
from queue_server.server.conn_output import Output
from queue_server.server.conn_state import ConnState, check_move
from queue_server.server.faces import Server
from queue_server.server.grants import Grant
from queue_server.server.waiters import Waiter

# Unread input kept while a client is blocked or its replies are not being read.
INPUT_HIGH_WATER = 4 * 1024 * 1024
SIMPLE_PUT = re.compile(rb"PUT ([A-Za-z0-9_]{1,128}) (-?[0-9]{1,19}) ([0-9]{1,10})").fullmatch
TOO_MANY_CLIENTS = b"503 Too Many Clients\r\n"

# Module globals: `ConnState.X` costs an enum class lookup per test (bench: +4% of a PUT).
_OPEN = ConnState.OPEN

log = logging.getLogger("slotmap.queue_server")


class Connection(Output, asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        # Before AUTH a line (and all input) is bounded by door.unauthenticated_bytes.
        self.reader = FrameReader(MAX_LINE_BYTES if server.token is None
                                  else min(MAX_LINE_BYTES, server.door.unauthenticated_bytes))
        self.pending: Parsed | None = None  # a request waiting for its data block
        self.out: list[bytes] = []
        self.dirty = False  # has replies waiting for the turn's flush
        self.authenticated = server.token is None
        # The role's grant (grants.py; auth.take_grant): None is unlimited (no token
        # configured, or the admin's). `fast_put`: the plain PUT needs no question of it.
        self.grant: Grant | None = None
        self.fast_put = self.authenticated
        self.refusals_logged: set[str] | None = None  # auth.refuse
        # A CLONE block may be larger than max_job_bytes only from a client that proved the
        # token, or from this machine when no token is set (README "Limits").
        self.may_send_states = False
        self.auth_failures = 0
        self.unauthenticated_left = server.door.unauthenticated_bytes  # auth.py
        # Input bytes held, as charged to the door's total (door.py); `starved`: not read
        # until the total is back under its bound.
        self.charged = 0
        self.starved = False
        self.peer: object = None
        self.active = True  # sent something since the idle sweep last looked (server.py)
        self.idle_since = 0.0
        # Bytes of replies in `out` counted while pipelining (slow path only: fast-path PUT
        # replies are bounded by the input they answer); past output_soft_limit_bytes
        # reading stops until flush(), which also cuts a reply over the hard limit.
        self.out_bytes = 0
        self.hard_limit_bytes = server.settings.output_hard_limit_bytes
        self.hold: str | None = None
        self.waiter: Waiter | None = None
        self.state = ConnState.OPEN  # moved only by move() (conn_state.py)
        self.is_replication_link = False  # set by start_replication()
        self.held_turns = 0  # sync mode: turns of replies waiting for replicas (sync_commit.py)
        self._reading_paused = False
        self._writing_paused = False
        # group commit's cohort (queue_server/server/cohort.py)
        self.cohort = server.journal.cohort
        self.fd = -1
        self.requested = False
        self.quick = True
        self.answered_at = 0.0
        self.door: str | None = None  # CLIENT NAME: who its RETRY/DELETE are counted for
        # ` BY <name>` of its hand-outs' SYNC GET, encoded once at CLIENT NAME (b"" unnamed):
        # each job it takes keeps a reference to it as who runs it.
        self.door_by = b""

    # ------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1
        self.peer = transport.get_extra_info("peername")
        server = self.server
        if not server.door.admit(self, server.connections):
            self.refuse(TOO_MANY_CLIENTS)
            return
        self.may_send_states = server.token is None and guard.is_loopback(self.peer)
        server.connections.add(self)

    @property
    def closing(self) -> bool:
        """No more requests are read."""
        return self.state is not _OPEN

    def move(self, state: ConnState) -> None:
        self.state = check_move(self.peer, self.state, state)

    def quit(self) -> None:
        """QUIT, SHUTDOWN: read nothing more; close once the replies written are sent."""
        self.move(ConnState.QUITTING)

    def start_replication(self, peer: bytes, *, may_confirm: bool = True) -> None:
        """This connection is a replica's link now (SNAPSHOT, INTERCONNECT from a peer at
        `peer`, HOST:PORT): the journal streams the records to it, and its output is never
        cut at the limit. `may_confirm`: its REPLACKs may count as a replica in sync (it
        was sent a snapshot, from the address it claims: control.py)."""
        self.is_replication_link = True
        self.server.link_replica(self, peer, may_confirm=may_confirm)

    def close(self) -> None:
        """Close now; replies already handed to the transport still go out."""
        self.move(ConnState.CLOSED)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.move(ConnState.CLOSED)
        self.server.connections.discard(self)
        self.server.door.forget(self)
        self.server.journal.unlink(self)
        if self.waiter is not None:
            self.server.waiters.remove(self.waiter)  # the job stays queued for the next one
            self.waiter = None
        self.pending = None
        self.reader.clear()

    def data_received(self, data: bytes) -> None:
        if self.state is not _OPEN:
            return  # quitting, or draining after a fatal error: the stream is no longer trusted
        self.reader.buffer += data  # feed() without its call: this is the hot path
        self.active = True
        cohort = self.cohort
        if cohort is not None and not self.requested:
            cohort.arrived(self, time.perf_counter())
        if self.waiter is None and self.hold is None and (
                not self._writing_paused or self.is_replication_link):
            self.server.process_and_answer(self)
        # process() compacts the reader: all of its buffer is unread here.
        held = len(self.reader.buffer)
        if held or self.charged:  # a request-reply client holds nothing: no call
            self._recharge(held)
        if self._reading_paused or self._writing_paused or held > INPUT_HIGH_WATER:
            self._apply_flow_control()

    def _recharge(self, held: int) -> None:
        """Charge what this connection holds to the door's total (door.py)."""
        if (not self.authenticated and held > self.unauthenticated_left + self.admitted_bytes()
                and self.state is _OPEN):
            self.fail(responses.AUTH_REQUIRED)  # more than AUTH and a small block before AUTH
            held = 0
        self.server.door.recharge(self, held, self.admitted_bytes())

    def admitted_bytes(self) -> int:
        """The block being read, let in whole by the door (0 when none)."""
        pending = self.pending
        return pending.data_len if pending is not None else 0

    def set_starved(self, starved: bool) -> None:
        self.starved = starved
        self._apply_flow_control()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self.server.door.writing_paused.add(self)  # its unsent replies count (door.py)
        self._apply_flow_control()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self.server.door.writing_paused.discard(self)
        self.resume()

    # ------------------------------------------------------------ reading requests

    def process(self) -> None:
        """Execute every complete request in the buffer (stops while blocked)."""
        server = self.server
        server.fire_timers_if_due()
        reader = self.reader
        take_line = reader.line
        take_block = reader.block
        size = len(reader.buffer)
        try:
            while self.waiter is None and self.state is _OPEN:
                pending = self.pending
                if pending is not None:
                    data = take_block(pending.data_len)
                    if data is None:
                        break
                    self.pending = None
                    server.execute_with_data(self, pending, data)
                    continue
                if reader.position == size:
                    break  # all read (the usual end): no call to find no line
                line = take_line()
                if line is None:
                    break
                if line[:4] == b"PUT " and self.fast_put:
                    # Fast path for the plain `PUT q p len` whose block is already here.
                    match = SIMPLE_PUT(line)
                    if match is not None:
                        queue, raw_priority, raw_len = match.groups()
                        data_len = int(raw_len)
                        priority = int(raw_priority)
                        position = reader.position
                        end = position + data_len
                        if (end <= size and data_len <= server.settings.max_job_bytes
                                and INT64_MIN <= priority <= INT64_MAX):
                            # reader.block() without its call (1.5% of a pipelined PUT)
                            reader.position = end
                            data = bytes(reader.buffer[position:end])
                            server.put_plain(self, queue.decode(), priority, data)
                            continue
                if line and not line.isspace() and self._execute_line(line):
                    break
        except LineTooLong:
            self.fail(responses.LINE_TOO_LONG)
        reader.compact()

    def _execute_line(self, line: bytes) -> bool:
        """Run one request line; True when no more requests may be read for now."""
        server = self.server
        if not self.authenticated:
            return auth.before_auth(self, line)
        try:
            parsed = parse_line(line)
        except ProtocolError as error:
            # Every HTTP request line or header fails to parse: checked only here, off the hot path.
            kind = guard.cross_protocol(line)
            if kind is not None:
                return self.refuse_cross_protocol(kind)
            if self.is_replication_link:
                # A reply would land inside the records streamed to the replica: it could
                # not apply it, and its byte count would no longer be ours.
                server.journal.cut(self, f"it sent {bytes(line[:80])!r}: {error.reply.decode('ascii', 'replace')}")
                return True
            self.write(error.reply + b"\r\n")
            return False
        if parsed.data_len >= 0:
            limit = server.max_data_bytes(parsed)
            if limit > server.settings.max_job_bytes and not self.may_send_states:
                limit = server.settings.max_job_bytes
            if parsed.data_len > limit:
                self.fail(responses.JOB_TOO_LARGE)
                return True
            # (a CLONE's whole state, from a trusted peer, is let in whatever its size)
            if (parsed.data_len > self.reader.unread() and limit <= server.settings.max_job_bytes
                    and not server.door.may_reserve(self, parsed.data_len)):
                self.fail(door.BUSY_INPUT_FULL)
                return True
            self.pending = parsed
            return False
        assert parsed.command is not None
        if not self.dirty:
            # The turn's first reply (all a request-reply client ever has): bounded by the
            # hard limit in flush(), so the round trip pays no counting (bench: +5% of
            # instructions per GET+DONE when every reply was counted).
            server.execute(self, parsed.command)
            return self.hold is not None  # a wrong AUTH held reading back (auth.py)
        out = self.out
        before = len(out)
        server.execute(self, parsed.command)
        if len(out) > before:
            self.out_bytes += sum(map(len, out[before:]))
            if self.out_bytes > server.settings.output_soft_limit_bytes:
                return self._over_soft_limit()
        return self.hold is not None

    def hold_reading(self, reason: str) -> None:
        """Read no requests until `release_hold` (conn_output.HOLD_OUTPUT, auth.HOLD_AUTH)."""
        self.hold = reason
        self._apply_flow_control()

    def release_hold(self) -> None:
        self.hold = None
        self.resume()

    def refuse_cross_protocol(self, kind: str) -> bool:
        """Redis's answer to cross-protocol scripting: a browser made to post to this port
        sends a request line and headers first; close before its body can run as commands."""
        log.warning("connection from %s sent %s: possible cross-protocol attack (a web page "
                    "posting to this port?); closed before any later request of it runs",
                    self.peer, kind)
        self.pending = None
        if self.dirty:
            self.move(ConnState.QUITTING)  # earlier replies still go out first
        else:
            self.close()
        return True

    # ------------------------------------------------------------ writing replies (and conn_output.py)

    def write(self, reply: bytes) -> None:
        self.out.append(reply)
        if not self.dirty:
            self.dirty = True
            self.server.mark_dirty(self)

    def write_parts(self, parts: list[bytes]) -> None:
        self.out.extend(parts)
        if not self.dirty:
            self.dirty = True
            self.server.mark_dirty(self)

    # ------------------------------------------------------------ blocking and flow control

    def peer_gone(self) -> bool:
        """True when the client has already closed (peer.py): asked before a blocked
        client is handed a job, so a job never goes to a client that left while it waited."""
        return peer.closed_by_peer(self.transport)

    def block(self, waiter: Waiter) -> None:
        self.waiter = waiter

    def unblock(self) -> None:
        """The wait ended (answered): read the requests that queued up behind it."""
        self.waiter = None
        asyncio.get_running_loop().call_soon(self.resume)

    def resume(self) -> None:
        if (self.waiter is None and self.hold is None and self.state is _OPEN
                and not self._writing_paused and self.reader.unread()):
            self.process()
            held = len(self.reader.buffer)
            if held or self.charged:
                self._recharge(held)
        self._apply_flow_control()

    def _apply_flow_control(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        # A replication link is read while its stream backs up: its REPLACKs are its heartbeat.
        should_pause = (self._writing_paused and not self.is_replication_link) or self.hold is not None or self.starved or (
            self.reader.unread() > INPUT_HIGH_WATER and (self.waiter is not None or self.pending is None)
        )
        if should_pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False
