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

from queue_server.protocol.client_errors import ConnectionLost, QueueServerError
from queue_server.protocol.requests import Address, format_address
from queue_server.server.settings import ServerSettings

log = logging.getLogger("slotmap.queue_server")

ASK_TIMEOUT_S = 2.0


def ask_id(address: Address, token: str | None, timeout_s: float = ASK_TIMEOUT_S) -> int | None:
    """The server id at `address` (INTERCONNECT), None if it does not answer as a server."""
    # Here, not at the top: only --join needs the client, and every server start paid for
    # importing it (about a tenth of the start's CPU).
    from queue_server.client import QueueClient

    try:
        with QueueClient(format_address(address), token=token, timeout_s=timeout_s,
                         connect_timeout_s=timeout_s, reconnect_attempts=0) as client:
            return client.interconnect()
    except ConnectionLost as exc:
        log.info("join: %s does not answer (%s)", format_address(address), exc)
    except QueueServerError as exc:
        log.warning("join: %s is not a queue server we can join (%s)", format_address(address), exc)
    return None


def join(settings: ServerSettings) -> ServerSettings:
    """The settings to serve with after asking settings.join (this server's own address skipped)."""
    own = (settings.host, settings.port)
    live = {peer: server_id for peer in settings.join if peer != own
            if (server_id := ask_id(peer, settings.cluster_token)) is not None}
    if not live:
        log.info("join: no peer answers: starting as server %d", settings.server_id)
        return settings
    primary = min(live, key=lambda peer: (live[peer], peer))
    new_id = max(live.values()) + 1
    log.warning("join: peers answer with ids %s: this server is %d, a replica of %s:%d",
                sorted(live.values()), new_id, *primary)
    return dataclasses.replace(settings, server_id=new_id, replica_of=primary)
