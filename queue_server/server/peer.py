"""Whether a client has closed its end already, before its EOF is read (a socket probe)."""
from __future__ import annotations

import asyncio
import socket


def closed_by_peer(transport: asyncio.Transport | None) -> bool:
    """True when the client has already closed: its EOF may not be processed yet.

    Asked before a blocked client is handed a job, so a job never goes to a client
    that left while it waited (it goes to the next waiter or stays queued).
    """
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
