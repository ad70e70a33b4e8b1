"""CANCEL <q> <key> (PROTOCOL Part B, opt-in): a waiting job is removed as DELETE removes
it; a running one ends dead now with "cancelled by <door>" through FAIL's path, so the
journal and the replicas record it as any dead job. The lease is gone with it: a DONE that
arrives after the cancel is answered as for a lapsed lease (the job never ends both done
and dead, the store being single-threaded). A job finished before the cancel is not found."""
from __future__ import annotations

import time

from queue_server.protocol import jobs as pj
from queue_server.server import responses
from queue_server.server.faces import Conn, Server
from queue_server.server.store_types import UNNAMED_DOOR, Job

REMOVED = b"200 OK removed\r\n"
CANCELLED = b"200 OK cancelled\r\n"


def cancel(server: Server, conn: Conn, command: pj.Cancel) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
        return
    store = server.store
    door = conn.door or UNNAMED_DOOR
    place = store.keys.get(command.key)
    if type(place) is Job and place.queue.name == command.queue:  # type: ignore[union-attr]
        store.fail(place.id, b"cancelled by " + door.encode("ascii"), time.time(), dead=True)  # type: ignore[union-attr]
        conn.write(CANCELLED)
        return
    outcome = store.delete(command.queue, (command.key,), door)[0]
    conn.write(REMOVED if outcome == "ok" else responses.JOB_NOT_FOUND)
