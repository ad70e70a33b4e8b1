"""A hostile ZeroMQ peer over a raw TCP socket: a ZMTP 3.0 handshake, then one frame that
claims any size, streamed lazily (the test process never holds it), and a reading of a
process's RSS from /proc; a master that writes its frames by hand (RawMaster). Imported by
name from the tests of this folder."""
from __future__ import annotations

import json
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

import zmq

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


def report_dict(host: str, *, queue: str = "q", busy_s: object = 0.0, capacity: object = 4,
                pid: int = 4242, jobs_done: int = 0) -> dict[str, Any]:
    """A host report as JSON-ready data with one serving slot on `queue`: any field can then
    be set to what no model would build (NaN, a 400-digit integer, a hostile name)."""
    slot = {
        "slot_id": 1, "pid": pid + 1, "state": "running", "phase": "idle", "queue": queue,
        "assigned_queue": queue, "uptime_s": 5.0, "busy_s": busy_s, "jobs_done": jobs_done,
    }
    return {
        "host": host, "master_pid": pid, "sent_at_unix": time.time(), "capacity": capacity,
        "capacity_by_memory": 4, "capacity_by_load": 4, "max_slots": 4, "avg_slot_bytes": 1 << 20,
        "master_pss_bytes": 1 << 20, "slots_pss_bytes": 1 << 20, "slots_measured": 1,
        "mem_available_bytes": 1 << 30, "load_avg_1m": 0.1, "cpus": 2, "slots": [slot],
    }


def master_frame(report: dict[str, Any], *, leaving: bool = False) -> bytes:
    """The MasterFrame's JSON, written by hand: Python's json writes NaN and Infinity as
    JavaScript does, and integers of any length."""
    return json.dumps({"report": report, "leaving": leaving}).encode()


class RawMaster:
    """A DEALER on the manager's master link that sends hand-written frames and reads what
    the manager answers (ManagerFrame JSON: its `slots` is None until a plan includes it)."""

    def __init__(self, endpoint: str) -> None:
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)

    def send(self, frame: bytes) -> None:
        self.socket.send(frame)

    def planned_slots(self) -> dict[str, str] | None:
        """The last part of the map received (after draining); None when no plan named it."""
        last: dict[str, str] | None = None
        while self.socket.poll(0, zmq.POLLIN):
            slots = json.loads(self.socket.recv()).get("slots")
            if slots is not None:
                last = slots
        return last

    def close(self) -> None:
        self.socket.close()
        self.context.term()
