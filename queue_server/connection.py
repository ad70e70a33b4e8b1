"""One client connection: framing (lines, data blocks), flow control, graceful error close."""
from __future__ import annotations

import asyncio
import re
import socket
import time
from typing import TYPE_CHECKING

from queue_server import responses
from queue_server.errors import ProtocolError
from queue_server.protocol import INT64_MAX, INT64_MIN, MAX_LINE_BYTES, Parsed, parse_line
from queue_server.waiters import Waiter

if TYPE_CHECKING:
    from queue_server.server import QueueServer

# Unread input kept while a client is blocked or its replies are not being read.
INPUT_HIGH_WATER = 4 * 1024 * 1024
GRACEFUL_CLOSE_S = 0.5
SIMPLE_PUT = re.compile(rb"PUT ([A-Za-z0-9_]{1,128}) (-?[0-9]{1,19}) ([0-9]{1,10})").fullmatch


class Connection(asyncio.Protocol):
    def __init__(self, server: QueueServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.pending: Parsed | None = None  # a request waiting for its data block
        self.out: list[bytes] = []
        self.dirty = False  # has replies waiting for the turn's flush
        self.authenticated = server.token is None
        self.waiter: Waiter | None = None
        self.closing = False  # no more requests are read
        self.close_after_flush = False
        self.graceful_close_after_flush = False
        self.is_replication_link = False
        self._reading_paused = False
        self._writing_paused = False
        # group commit's cohort (queue_server/cohort.py)
        self.fd = -1
        self.requested = False
        self.quick = True
        self.answered_at = 0.0

    # ------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server.connections.discard(self)
        self.server.links.discard(self)
        if self.waiter is not None:
            self.server.waiters.remove(self.waiter)  # the job stays queued for the next one
            self.waiter = None
        self.pending = None
        self.buffer.clear()

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return  # draining after a fatal error: the stream is no longer trusted
        self.buffer += data
        cohort = self.server.cohort
        if cohort is not None and not self.requested:
            cohort.arrived(self, time.perf_counter())
        if self.waiter is None and not self._writing_paused:
            self.server.process_and_answer(self)
        if self._reading_paused or self._writing_paused or len(self.buffer) > INPUT_HIGH_WATER:
            self._apply_flow_control()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._apply_flow_control()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self.resume()

    # ------------------------------------------------------------ reading requests

    def process(self) -> None:
        """Execute every complete request in the buffer (stops while blocked)."""
        server = self.server
        server.fire_timers_if_due()
        buffer = self.buffer
        position = 0
        size = len(buffer)
        while self.waiter is None and not self.closing:
            pending = self.pending
            if pending is not None:
                end = position + pending.data_len
                if end > size:
                    break
                data = bytes(buffer[position:end])
                position = end
                self.pending = None
                server.execute_with_data(self, pending, data)
                continue
            newline = buffer.find(b"\n", position)
            if newline < 0:
                unterminated = size - position
                # One byte past the limit may still be the CR of a CRLF; two may not.
                if unterminated > MAX_LINE_BYTES + 1 or (
                    unterminated == MAX_LINE_BYTES + 1 and buffer[size - 1] != 13
                ):
                    self.fail(responses.LINE_TOO_LONG)
                break
            end = newline - 1 if newline > position and buffer[newline - 1] == 13 else newline
            if end - position > MAX_LINE_BYTES:
                self.fail(responses.LINE_TOO_LONG)
                break
            line = bytes(buffer[position:end])
            position = newline + 1
            if line[:4] == b"PUT " and self.authenticated:
                # Fast path for the plain `PUT q p len` whose block is already here.
                match = SIMPLE_PUT(line)
                if match is not None:
                    queue, raw_priority, raw_len = match.groups()
                    data_len = int(raw_len)
                    priority = int(raw_priority)
                    if (position + data_len <= size and data_len <= server.settings.max_job_bytes
                            and INT64_MIN <= priority <= INT64_MAX):
                        data = bytes(buffer[position:position + data_len])
                        position += data_len
                        server.put_plain(self, queue.decode(), priority, data)
                        continue
            if line and not line.isspace():
                self._execute_line(line)
        if position:
            del buffer[:position]

    def _execute_line(self, line: bytes) -> None:
        server = self.server
        if not self.authenticated and line.split(None, 1)[0] != b"AUTH":
            self._refuse_before_auth(line)
            return
        try:
            parsed = parse_line(line)
        except ProtocolError as error:
            self.write(error.reply + b"\r\n")
            return
        if parsed.data_len >= 0:
            if parsed.data_len > server.max_data_bytes(parsed):
                self.fail(responses.JOB_TOO_LARGE)
                return
            self.pending = parsed
            return
        assert parsed.command is not None
        server.execute(self, parsed.command)

    def _refuse_before_auth(self, line: bytes) -> None:
        try:
            data_len = parse_line(line).data_len
        except ProtocolError:
            data_len = -1
        if data_len >= 0:  # keep the stream in step: swallow the block, then refuse
            self.pending = Parsed(None, data_len, ProtocolError(responses.AUTH_REQUIRED[:-2]))
        else:
            self.write(responses.AUTH_REQUIRED)

    # ------------------------------------------------------------ writing replies

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

    def flush(self) -> None:
        self.dirty = False
        transport = self.transport
        if transport is None or transport.is_closing():
            self.out.clear()
            return
        if self.out:
            transport.write(b"".join(self.out))
            self.out.clear()
        if self.graceful_close_after_flush:
            self.graceful_close_after_flush = False
            if transport.can_write_eof():
                transport.write_eof()
            asyncio.get_running_loop().call_later(GRACEFUL_CLOSE_S, transport.close)
        elif self.close_after_flush:
            transport.close()

    def abort(self) -> None:
        """Cut the connection at once, replies unsent."""
        self.out.clear()
        self.closing = True
        self.pending = None
        if self.transport is not None:
            self.transport.abort()

    def fail(self, reply: bytes) -> None:
        """Send a fatal error, shut down writing, drain input briefly, then close."""
        self.write(reply)
        self.closing = True
        self.pending = None
        self.graceful_close_after_flush = True

    # ------------------------------------------------------------ blocking and flow control

    def peer_gone(self) -> bool:
        """True when the client has already closed: its EOF may not be processed yet.

        Asked before a blocked client is handed a job, so a job never goes to a client
        that left while it waited (it goes to the next waiter or stays queued).
        """
        transport = self.transport
        if transport is None or transport.is_closing():
            return True
        raw = transport.get_extra_info("socket")
        if raw is None:
            return False
        try:
            with socket.fromfd(raw.fileno(), socket.AF_INET, socket.SOCK_STREAM) as probe:
                return probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError):
            return False  # nothing to read: still connected
        except OSError:
            return True  # reset or otherwise broken

    def block(self, waiter: Waiter) -> None:
        self.waiter = waiter

    def unblock(self) -> None:
        """The wait ended (answered): read the requests that queued up behind it."""
        self.waiter = None
        asyncio.get_running_loop().call_soon(self.resume)

    def resume(self) -> None:
        if self.waiter is None and not self.closing and not self._writing_paused and self.buffer:
            self.process()
        self._apply_flow_control()

    def _apply_flow_control(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        should_pause = self._writing_paused or (
            len(self.buffer) > INPUT_HIGH_WATER and (self.waiter is not None or self.pending is None)
        )
        if should_pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False
