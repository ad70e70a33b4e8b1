"""The manager's end of the master link: a ZeroMQ ROUTER (reports in, slot maps out), optional CURVE."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import zmq
import zmq.auth.thread

from master.manager_link import CurveKeys, LinkFrameError, ManagerFrame, MasterFrame
from master.zmq_router import drain, send_to

log = logging.getLogger(__name__)

CURVE_DOMAIN = "slotmap"


@dataclass(frozen=True, slots=True)
class Received:
    routing_id: bytes
    frame: MasterFrame


class _OnlyOurKey:
    """ZAP credentials check: a master must present the cluster's own public key."""

    def __init__(self, public: bytes) -> None:
        self.public = public

    def callback(self, domain: str, key: bytes) -> bool:
        allowed = key == self.public
        if not allowed:
            log.warning("refused a CURVE client with an unknown key")
        return allowed


class ManagerSocket:
    def __init__(self, endpoint: str, *, curve: CurveKeys | None = None) -> None:
        self.endpoint = endpoint
        self._context: zmq.Context[Any] = zmq.Context()
        self._auth: zmq.auth.thread.ThreadAuthenticator | None = None
        self.socket: zmq.Socket[bytes] = self._context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        # A master that is gone raises EHOSTUNREACH instead of queueing its heartbeats.
        self.socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
        if curve is not None:
            self._auth = zmq.auth.thread.ThreadAuthenticator(self._context)
            self._auth.start()
            self._auth.configure_curve_callback(CURVE_DOMAIN, credentials_provider=_OnlyOurKey(curve.public))
            self.socket.zap_domain = CURVE_DOMAIN.encode()
            self.socket.curve_server = True
            self.socket.curve_secretkey = curve.secret
            self.socket.curve_publickey = curve.public
        try:
            self.socket.bind(endpoint)
        except zmq.ZMQError:
            self.close()
            raise

    def receive(self, timeout_s: float) -> list[Received]:
        """Wait up to timeout_s for a frame, then take every frame waiting."""
        if not self.socket.poll(max(0, int(timeout_s * 1000)), zmq.POLLIN):
            return []
        frames = drain(self.socket, MasterFrame.decode, LinkFrameError, link="master link")
        return [Received(routing_id, frame) for routing_id, frame in frames]

    def send(self, routing_id: bytes, frame: ManagerFrame) -> bool:
        """False when that master is no longer connected (its liveness decides what follows)."""
        return send_to(self.socket, routing_id, frame.encode())

    def close(self) -> None:
        self.socket.close(linger=0)
        if self._auth is not None:
            self._auth.stop()
        self._context.term()
