"""`--join HOST:PORT,...`: at start, a server asks the cluster who is there.

PROTOCOL.md: "the first server of a cluster gets 1, each later one (max id in the
cluster)+1; a former primary that comes back gets max+1". So before serving, a server
started with --join asks every listed peer for its id (INTERCONNECT). If none answers,
it starts with its own configured id, as the primary. If some answer, it takes
(the highest id)+1 and becomes a replica of the live server with the lowest id: a
former primary that was replaced comes back behind its successor, with its stale state
replaced by the successor's snapshot, instead of taking clients back to old data.
"""
from __future__ import annotations

import dataclasses
import logging
import socket
from collections.abc import Sequence

from queue_server.server import ServerSettings

log = logging.getLogger("slotmap.queue_server")

ASK_TIMEOUT_S = 2.0


def ask_id(address: tuple[str, int], token: str | None,
           timeout_s: float = ASK_TIMEOUT_S) -> int | None:
    """The server id at `address` (INTERCONNECT), None if it does not answer as a server."""
    request = b"INTERCONNECT\r\n"
    if token is not None:
        request = b"AUTH " + token.encode() + b"\r\n" + request
    try:
        with socket.create_connection(address, timeout=timeout_s) as sock:
            sock.sendall(request)
            reply = b""
            expected_lines = request.count(b"\n")
            while reply.count(b"\n") < expected_lines:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
    except OSError as exc:
        log.info("join: %s:%d does not answer (%s)", *address, exc.strerror or exc)
        return None
    last = reply.rstrip(b"\r\n").rsplit(b"\n", 1)[-1].strip()
    parts = last.split()
    if len(parts) != 3 or parts[:2] != [b"200", b"OK"] or not parts[2].isdigit():
        log.warning("join: %s:%d is not a queue server we can join (%r)", *address, last[:200])
        return None
    return int(parts[2])


def join(settings: ServerSettings, peers: Sequence[tuple[str, int]]) -> ServerSettings:
    """The settings to serve with after asking `peers` (this server's own address skipped)."""
    own = (settings.host, settings.port)
    live = {peer: server_id for peer in peers if peer != own
            if (server_id := ask_id(peer, settings.token)) is not None}
    if not live:
        log.info("join: no peer answers: starting as server %d", settings.server_id)
        return settings
    primary = min(live, key=lambda peer: (live[peer], peer))
    new_id = max(live.values()) + 1
    log.warning("join: peers answer with ids %s: this server is %d, a replica of %s:%d",
                sorted(live.values()), new_id, *primary)
    return dataclasses.replace(settings, server_id=new_id, replica_of=primary)
