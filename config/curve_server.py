"""A server's ROUTER socket (the manager's, the pulsar's): bounded per peer, and with CURVE
its keys and the ZAP thread admitting client keys."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import zmq
import zmq.auth.thread

from config.curve import CURVE_DOMAIN, AuthorizedKeys, CurveKeys


class CurveServer:
    """CURVE for a ROUTER: the server's keys, the ZAP thread that admits client keys."""

    def __init__(self, context: zmq.Context[Any], keys: CurveKeys, authorized_dir: str | Path | None) -> None:
        self.keys = keys
        self.auth = zmq.auth.thread.ThreadAuthenticator(context)
        self.auth.start()
        self.authorized = AuthorizedKeys(keys.public, authorized_dir)
        self.auth.configure_curve_callback(CURVE_DOMAIN, credentials_provider=self.authorized)

    def serve_on(self, socket: zmq.Socket[bytes]) -> None:
        socket.zap_domain = CURVE_DOMAIN.encode()
        socket.curve_server = True
        socket.curve_secretkey = self.keys.secret
        socket.curve_publickey = self.keys.public

    def owner(self, frame: zmq.Frame) -> str | None:
        """The host the sender's per-host key speaks for (ZAP's User-Id is its z85 public key);
        None for the cluster key."""
        return self.authorized.owner(str(frame.get("User-Id")).encode())

    def stop(self) -> None:
        self.auth.stop()


class RouterServer:
    """A bound ROUTER in a context of its own, bounded per peer, with CURVE when keys are
    given (the manager's link with the masters, the pulsar)."""

    def __init__(self, endpoint: str, *, max_message_bytes: int, queued_messages: int,
                 curve: CurveKeys | None = None, authorized_keys_dir: str | Path | None = None,
                 mandatory: bool = False) -> None:
        self.context: zmq.Context[Any] = zmq.Context()
        self.curve: CurveServer | None = None
        self.socket: zmq.Socket[bytes] = self.context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        if mandatory:  # a peer that is gone raises EHOSTUNREACH instead of queueing frames
            self.socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
        # A frame over the bound disconnects its sender before its body is read (8 bytes of
        # a 1.5 GB frame are read), and at most `queued_messages` wait per peer.
        self.socket.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
        self.socket.setsockopt(zmq.RCVHWM, queued_messages)
        try:
            if curve is not None:
                self.curve = CurveServer(self.context, curve, authorized_keys_dir)
                self.curve.serve_on(self.socket)
            self.socket.bind(endpoint)
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        self.socket.close(linger=0)
        if self.curve is not None:
            self.curve.stop()
        self.context.term()
