"""CANCEL <q> <key> (PROTOCOL Part B, opt-in): a waiting job is removed as DELETE removes
it; a running one ends dead now with "cancelled by <door>" through FAIL's path, so the
journal and the replicas record it as any dead job. The lease is gone with it: a DONE that
arrives after the cancel is answered as for a lapsed lease (the job never ends both done
and dead, the store being single-threaded). A job finished before the cancel is not found.

Every cancel goes into the primary's ring (cancel_ring.py), read with CANCELLED: the
masters stop the slot that holds a cancelled lease, the manager writes the event."""
from __future__ import annotations

import time

from queue_server.protocol import jobs as pj
from queue_server.protocol.cancels import CancelledSince
from queue_server.protocol.keyed import key_text
from queue_server.server import responses
from queue_server.server.faces import Conn, Server
from queue_server.server.job_views import json_block
from queue_server.server.store_types import UNNAMED_DOOR, Job

REMOVED = b"200 OK removed\r\n"
CANCELLED = b"200 OK cancelled\r\n"


def cancel(server: Server, conn: Conn, command: pj.Cancel) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
        return
    store = server.store
    door = conn.door or UNNAMED_DOOR
    now = time.time()
    place = store.keys.get(command.key)
    if type(place) is Job and place.queue.name == command.queue:  # type: ignore[union-attr]
        lease: int = place.id  # type: ignore[union-attr]
        if store.fail(lease, b"cancelled by " + door.encode("ascii"), now, dead=True) is not False:
            server.cancels.add(lease=lease, queue=command.queue, key=key_text(command.key), door=door, at=now)
            conn.write(CANCELLED)
            return
    # No door: a cancel is not counted as a DELETE (its event comes from the ring, not STATS).
    outcome = store.delete(command.queue, (command.key,), None)[0]
    if outcome == "ok":
        server.cancels.add(lease=0, queue=command.queue, key=key_text(command.key), door=door, at=now)
        conn.write(REMOVED)
    else:
        conn.write(responses.JOB_NOT_FOUND)


def cancelled(server: Server, conn: Conn, command: CancelledSince) -> None:
    """CANCELLED <ring> <since>: answered offline too (it changes nothing)."""
    conn.write(json_block(server.cancels.page(command.ring, command.since)))
