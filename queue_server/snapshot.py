"""Snapshots: the whole state as SYNC records between a versioned header and a checked trailer.

Format, version 1 (what SNAPSHOT sends, CLONE takes and the data directory keeps):

    SLOTMAP-SNAPSHOT 1\r\n
    SYNC IDS <next id> <next item number>\r\n
    SYNC PUT <q> <p> <len>[ IS <item>][ UNTIL <unix>]\r\n<data>     (ready jobs, FIFO order;
                                                                     delayed ones with UNTIL)
    SYNC PUT ...\r\n<data> SYNC GET LAST <q> <id> <p>[ UNTIL <unix> THEN DONE|LATER]\r\n
                                                                    (each running job)
    END <records> <crc32 of everything between header and END, 8 hex digits>\r\n
"""
from __future__ import annotations

import random
import zlib
from collections.abc import Iterator

from queue_server import records, replay
from queue_server.errors import SnapshotError
from queue_server.store import Store

HEADER = b"SLOTMAP-SNAPSHOT 1\r\n"


def iter_body(store: Store) -> Iterator[bytes]:
    yield records.ids(store.next_id, store.next_item)
    for name, state in store.queues.items():
        for priority in sorted(state.levels, reverse=True):
            for data, item, _ready_at in state.levels[priority]:
                yield records.put(name, priority, data, item, None)
    for until, _seq, name, priority, data, item in store.delayed_jobs():
        yield records.put(name, priority, data, item, until)
    for job_id, job in store.running.items():
        yield records.put(job.queue.name, job.priority, job.data, job.item, None)
        yield records.get(job.queue.name, job_id, job.priority, True, job.expire_at, job.then_done)


def encode(store: Store) -> bytes:
    parts = list(iter_body(store))
    body = b"".join(parts)
    return HEADER + body + b"END %d %08x\r\n" % (len(parts), zlib.crc32(body))


def decode(
    blob: bytes, now: float, *, expire_done_default: bool = False,
    lock_timeouts_s: dict[str, float] | None = None, rng: random.Random | None = None,
) -> Store:
    """A new store from a snapshot; raises SnapshotError (and builds nothing) on any flaw."""
    if not blob.startswith(HEADER):
        raise SnapshotError("not a slotmap snapshot of version 1")
    trailer_start = blob.rfind(b"END ", len(HEADER))
    if trailer_start < 0 or not blob.endswith(b"\r\n"):
        raise SnapshotError("snapshot has no END trailer")
    fields = blob[trailer_start:].split()
    if len(fields) != 3:
        raise SnapshotError("snapshot trailer is malformed")
    body = blob[len(HEADER):trailer_start]
    try:
        expected_crc = int(fields[2], 16)
    except ValueError:
        raise SnapshotError("snapshot trailer is malformed") from None
    if zlib.crc32(body) != expected_crc:
        raise SnapshotError("snapshot checksum mismatch")
    store = Store(expire_done_default=expire_done_default, lock_timeouts_s=lock_timeouts_s, rng=rng)
    count = 0
    for command in replay.iter_records(body):
        reply = replay.apply(store, command, now)
        if not reply.startswith(b"200"):
            raise SnapshotError(f"snapshot record does not apply: {reply!r}")
        count += 1
    if fields[1] != b"%d" % count:
        raise SnapshotError(f"snapshot announces {fields[1]!r} records, holds {count}")
    store.records.clear()
    store.woken.clear()
    store.idled.clear()
    return store
