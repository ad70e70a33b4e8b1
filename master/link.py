"""The master's end of the slot link: a ZeroMQ ROUTER on an ipc:// socket (beacons in, assignments out)."""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import zmq

from master.lifecycle import Slot, SlotState
from master.zmq_router import drain, limit_inbound, send_to
from slot.beacon import Assignment, Beacon
from slot.errors import MessageError
from slot.link import slot_identity

# sockaddr_un.sun_path holds 108 bytes with the terminating NUL.
MAX_IPC_PATH_BYTES = 107
# [master] max_beacon_bytes: a real beacon is under 1 KiB.
DEFAULT_MAX_BEACON_BYTES = 64 * 1024
# Beacons waiting per slot: 5 s of them at the fastest beacon interval (10 ms) is plenty.
QUEUED_BEACONS = 500


class LinkError(Exception):
    """The link cannot be set up (the ipc path is too long or not writable)."""


class MasterLink:
    def __init__(self, ipc_dir: str | Path, *, max_beacon_bytes: int = DEFAULT_MAX_BEACON_BYTES) -> None:
        directory = Path(ipc_dir).absolute()
        self.path = directory / f"master-{os.getpid()}.sock"
        if len(str(self.path).encode()) > MAX_IPC_PATH_BYTES:
            raise LinkError(
                f"ipc path {self.path} is longer than {MAX_IPC_PATH_BYTES} bytes; "
                "set master.ipc_dir to a shorter directory"
            )
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LinkError(f"cannot create master.ipc_dir {directory}: {exc.strerror}") from exc
        self.endpoint = f"ipc://{self.path}"
        self._context = zmq.Context(io_threads=1)
        self.socket: zmq.Socket[bytes] = self._context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        # Fail fast on a slot that is not connected (yet): the retarget is resent later.
        self.socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
        limit_inbound(self.socket, max_message_bytes=max_beacon_bytes, queued_messages=QUEUED_BEACONS)
        self.socket.bind(self.endpoint)

    def receive(self) -> list[Beacon]:
        """Every beacon waiting now (never blocks); undecodable frames are logged and dropped."""
        return [beacon for _, beacon in drain(self.socket, Beacon.decode, MessageError, link="slot link")]

    def send(self, slot_id: int, pid: int, assignment: Assignment) -> bool:
        """Send an assignment; False when the slot is not connected (the caller retries)."""
        return send_to(self.socket, slot_identity(slot_id, pid), assignment.encode())

    def resend_retargets(self, slots: Iterable[Slot], now: float, resend_after_s: float) -> None:
        """The ROUTER drops a message to a slot not connected yet: resend until it reports."""
        for slot in slots:
            if slot.retarget_sent_at is None or slot.state is not SlotState.RUNNING:
                continue
            if slot.queue == slot.assignment.queue:
                slot.retarget_sent_at = None
            elif now - slot.retarget_sent_at >= resend_after_s:
                slot.retarget_sent_at = now
                self.send(slot.slot_id, slot.pid, slot.assignment)

    def close(self) -> None:
        self.socket.close()
        self._context.term()
        self.path.unlink(missing_ok=True)
