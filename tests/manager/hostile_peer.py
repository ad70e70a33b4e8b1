"""A hostile ZeroMQ peer over a raw TCP socket: a ZMTP 3.0 handshake, then one frame that
claims any size, streamed lazily (the test process never holds it), and a reading of a
process's RSS from /proc. Imported by name from the tests of this folder."""
from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

CHUNK_BYTES = 1024 * 1024
# ZMTP 3.0 greeting: signature, version 3.0, NULL mechanism, as-server 0, filler.
GREETING = b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31


def _ready_command(socket_type: bytes) -> bytes:
    name = b"Socket-Type"
    body = b"\x05READY" + bytes([len(name)]) + name + struct.pack(">I", len(socket_type)) + socket_type
    return b"\x04" + bytes([len(body)]) + body


@dataclass(frozen=True, slots=True)
class Flood:
    claimed_bytes: int
    sent_bytes: int
    # True when the peer closed the connection before the whole frame was sent.
    cut: bool
    seconds: float


def send_huge_frame(host: str, port: int, *, claimed_bytes: int, send_at_most_bytes: int,
                    timeout_s: float = 30.0) -> Flood:
    """Connect as a DEALER, announce one frame of `claimed_bytes`, and stream zeros until the
    peer closes the connection or `send_at_most_bytes` are sent."""
    started = time.monotonic()
    sent = 0
    cut = False
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(GREETING + _ready_command(b"DEALER"))
        chunk = b"\x00" * CHUNK_BYTES
        try:
            sock.sendall(b"\x02" + struct.pack(">Q", claimed_bytes))
            while sent < min(claimed_bytes, send_at_most_bytes):
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            cut = True
    return Flood(claimed_bytes, sent, cut, time.monotonic() - started)


def rss_bytes(pid: int) -> int:
    """VmRSS of a process, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")
