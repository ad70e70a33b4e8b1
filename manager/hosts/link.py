"""The manager's end of the master link: a ZeroMQ ROUTER (reports in, slot maps out), bounded frames, optional CURVE."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import zmq

from config.curve import CurveKeys
from config.curve_server import RouterServer
from manager.events.refusals import Refusals
from master.manager_frames import (
    DEFAULT_MAX_MESSAGE_BYTES,
    LinkFrameError,
    ManagerFrame,
    MasterFrame,
)
from master.zmq_router import drain_frames, send_to

# Reports waiting per master (one a heartbeat): with 1 MiB frames a master, or anyone
# connected, holds at most 16 MiB here.
QUEUED_REPORTS = 16


@dataclass(frozen=True, slots=True)
class Received:
    routing_id: bytes
    frame: MasterFrame
    # The host the sender's per-host CURVE key is named after (None: no CURVE, or the cluster key).
    key_owner: str | None = None


class ManagerSocket:
    def __init__(
        self,
        endpoint: str,
        *,
        curve: CurveKeys | None = None,
        authorized_keys_dir: str | Path | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = endpoint
        self.clock = clock
        # Frames refused here (they do not decode) and by Masters (spoofs, too many hosts).
        self.refusals = Refusals()
        self._server = RouterServer(endpoint, max_message_bytes=max_message_bytes,
                                    queued_messages=QUEUED_REPORTS, curve=curve,
                                    authorized_keys_dir=authorized_keys_dir, mandatory=True)
        self.socket = self._server.socket
        self._curve = self._server.curve

    def receive(self, timeout_s: float) -> list[Received]:
        """Wait up to timeout_s for a frame, then take the frames waiting (a bounded number)."""
        if not self.socket.poll(max(0, int(timeout_s * 1000)), zmq.POLLIN):
            return []
        received = []
        for routing_id, frame in drain_frames(self.socket, link="master link"):
            try:
                decoded = MasterFrame.decode(frame.bytes)
            except LinkFrameError as exc:
                self.refusals.refused("a frame that does not decode or is out of bounds",
                                      f"from connection {routing_id.hex()}: {exc}", self.clock())
                continue
            owner = self._curve.owner(frame) if self._curve is not None else None
            received.append(Received(routing_id, decoded, owner))
        return received

    def send(self, routing_id: bytes, frame: ManagerFrame) -> bool:
        """False when that master is no longer connected (its liveness decides what follows)."""
        return send_to(self.socket, routing_id, frame.encode())

    def close(self) -> None:
        self._server.close()
