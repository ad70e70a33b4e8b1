"""Helpers for the hostile-client tests: a server's resident memory and its log, an attacker
socket that never reads, a second client that must still be served."""
from __future__ import annotations

import socket
from pathlib import Path

from tests.conftest import HOST, REPLY_TIMEOUT_S, QueueServer, RawClient

# What one hostile client may add to the server's resident memory in these tests; the
# attacks measured before the bounds took it from ~45 MB to over 1 GB.
RSS_MARGIN_BYTES = 64 * 1024 * 1024


def rss_bytes(pid: int) -> int:
    """VmRSS of a live process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def silent_socket(server: QueueServer, *, receive_buffer_bytes: int = 4096) -> socket.socket:
    """A connection that sends but never reads (a small receive window, as a stalled peer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
    sock.connect((HOST, server.port))
    return sock


def served(server: QueueServer, token: str | None = None, *, timeout_s: float = REPLY_TIMEOUT_S) -> bool:
    """A new client gets PING answered (after AUTH with `token`), each reply within `timeout_s`."""
    client = RawClient(server.host, server.port, timeout_s=timeout_s)
    try:
        if token is not None and client.request(b"AUTH " + token.encode()) != b"200 OK":
            return False
        return client.request(b"PING") == b"200 PONG"
    finally:
        client.close()
