"""CURVE on a server socket (the manager's ROUTER, the pulsar's): its keys and the ZAP thread admitting client keys."""
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
