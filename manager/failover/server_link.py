"""One short-timeout connection from the sentinel to a queue server: a request line, its
reply line. A server that does not answer within ASK_TIMEOUT_S is a silent server for
this turn (the connection is dropped: a late reply must not answer the next request)."""
from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass

from config.endpoints import parse_host_port

log = logging.getLogger(__name__)

ASK_TIMEOUT_S = 0.3
MAX_REPLY_BYTES = 64 * 1024


@dataclass
class ServerLink:
    address: str  # HOST:PORT
    token: str | None = None
    sock: socket.socket | None = None
    buffer: bytes = b""

    def ask(self, line: bytes, timeout_s: float = ASK_TIMEOUT_S) -> bytes | None:
        """The reply line (without CRLF) to `line`, or None (unreachable, silent, closed)."""
        deadline = time.monotonic() + timeout_s
        try:
            sock = self.sock or self._connect(timeout_s)
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.sendall(line + b"\r\n")
            return self._line(sock, deadline)
        except (OSError, EOFError) as exc:
            log.debug("queue server %s: %s", self.address, exc)
            self.close()
            return None

    def read_line(self, timeout_s: float = ASK_TIMEOUT_S) -> bytes | None:
        """One more reply line (a multi-line reply), or None."""
        if self.sock is None:
            return None
        try:
            return self._line(self.sock, time.monotonic() + timeout_s)
        except (OSError, EOFError):
            self.close()
            return None

    def read_block(self, size: int, timeout_s: float = ASK_TIMEOUT_S) -> bytes | None:
        """A data block of `size` bytes after a `200 OK <len>` line, or None."""
        if self.sock is None or not 0 <= size <= MAX_REPLY_BYTES:
            return None
        deadline = time.monotonic() + timeout_s
        try:
            while len(self.buffer) < size:
                self.sock.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise EOFError("closed")
                self.buffer += chunk
        except (OSError, EOFError):
            self.close()
            return None
        block, self.buffer = self.buffer[:size], self.buffer[size:]
        return block

    def _connect(self, timeout_s: float) -> socket.socket:
        host, port = parse_host_port(self.address)
        sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock, self.buffer = sock, b""
        if self.token is not None:
            sock.sendall(b"AUTH " + self.token.encode() + b"\r\n")
            if self._line(sock, time.monotonic() + timeout_s) != b"200 OK":
                raise EOFError("AUTH refused")
        return sock

    def _line(self, sock: socket.socket, deadline: float) -> bytes:
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_REPLY_BYTES:
                raise EOFError("reply line too long")
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            chunk = sock.recv(4096)
            if not chunk:
                raise EOFError("closed")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.rstrip(b"\r")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self.buffer = None, b""
