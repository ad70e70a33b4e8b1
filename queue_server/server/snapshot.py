"""Snapshots: the whole state as SYNC records between a versioned header and a checked trailer.

Format, version 4 (what SNAPSHOT sends, CLONE takes and the data directory keeps):

    SLOTMAP-SNAPSHOT 4\r\n
    SYNC IDS <next id> <next item number> <next key number>\r\n
    SYNC PUT <q> <p> <len>[ IS <item>][ UNTIL <unix>] KEY <key>[ ATTEMPTS <n>]
        [ ERRORS <m>][ SOLO][ FAILED]\r\n<data><errors>
                                        (ready jobs, FIFO order; delayed ones with UNTIL)
    SYNC PUT ...\r\n<data> SYNC GET LAST <q> <id> <p>[ UNTIL <unix> THEN DONE|LATER][ AT <unix>]
        [ BY <name>][ MANAGED]\r\n    (each running job, its attempts before this run; AT: when
                                        it was handed out, BY: to which CLIENT NAME, both
                                        optional: a version 4 snapshot without them still reads)
    SYNC DEAD <q> <p> <len> KEY <key> ATTEMPTS <n> DIED <unix>[ IS <item>][ ERRORS <m>]
        \r\n<data><errors>              (dead jobs, oldest first per queue)
    SYNC KEPT <q> <p> <len> KEY <key> ATTEMPTS <n> READY <unix> DONE <unix>[ STARTED <unix>]
        [ IS <item>][ BY <door>][ ERRORS <m>][ RESULT <r>|LARGE <n>][ TRACE <tp>]
        \r\n<data><errors><result>      (finished jobs kept, oldest first per queue; version 4)
    END <records> <crc32 of everything between header and END, 8 hex digits>\r\n

<errors> is a job's error history, JSON `[[unix time, attempt, text], ...]` oldest first.
Version 3 (no finished jobs) is still read.
Version 2 (a job's last error only: `ERROR <m>[ AT <unix>]`, the text alone) is still read.
Version 1 (no keys, attempts or dead jobs; IDS without the key counter) is still read:
its jobs get server keys from the counter, in record order.
"""
from __future__ import annotations

import random
import zlib
from collections.abc import Iterator, Mapping

from queue_server.protocol.retry import DEFAULT_KEEP_DONE_TOTAL, QueuePolicy
from queue_server.server import records, replay
from queue_server.server.errors import SnapshotError
from queue_server.server.store import Store

HEADER = b"SLOTMAP-SNAPSHOT 4\r\n"
HEADERS = (HEADER, b"SLOTMAP-SNAPSHOT 3\r\n", b"SLOTMAP-SNAPSHOT 2\r\n", b"SLOTMAP-SNAPSHOT 1\r\n")


def iter_body(store: Store) -> Iterator[bytes]:
    yield records.ids(store.next_id, store.next_item, store.next_key)
    for name, state in store.queues.items():
        for priority in sorted(state.levels, reverse=True):
            for entry in state.levels[priority]:
                if id(entry) in state.gone:
                    continue  # its TTL ran out
                data, item, _ready_at, key, meta = entry
                yield records.put(name, priority, data, item, None, key, meta, store.ttl_at(key))
    for until, _seq, name, priority, data, item, key, meta in store.delayed_jobs():
        yield records.put(name, priority, data, item, until, key, meta, store.ttl_at(key))
    for job_id, job in store.running.items():
        yield records.put(job.queue.name, job.priority, job.data, job.item, None, job.key,
                          job.meta_back(job.attempts - 1))
        yield records.get(job.queue.name, job_id, job.priority, True, job.expire_at, job.then_done,
                          job.managed, records.at(job.taken_at), job.by)
    for state in store.queues.values():
        for dead in state.dead.values():
            yield records.dead(dead)
    yield from store.kept_records()


def encode(store: Store) -> bytes:
    parts = list(iter_body(store))
    body = b"".join(parts)
    return HEADER + body + b"END %d %08x\r\n" % (len(parts), zlib.crc32(body))


def decode(
    blob: bytes, now: float, *, expire_done_default: bool = False,
    lock_timeouts_s: dict[str, float] | None = None, rng: random.Random | None = None,
    policies: Mapping[str, QueuePolicy] | None = None, keep_done_total: int = DEFAULT_KEEP_DONE_TOTAL,
) -> Store:
    """A new store from a snapshot; raises SnapshotError (and builds nothing) on any flaw."""
    header = next((h for h in HEADERS if blob.startswith(h)), None)
    if header is None:
        raise SnapshotError("not a slotmap snapshot of version 1, 2, 3 or 4")
    trailer_start = blob.rfind(b"END ", len(header))
    if trailer_start < 0 or not blob.endswith(b"\r\n"):
        raise SnapshotError("snapshot has no END trailer")
    fields = blob[trailer_start:].split()
    if len(fields) != 3:
        raise SnapshotError("snapshot trailer is malformed")
    body = blob[len(header):trailer_start]
    try:
        expected_crc = int(fields[2], 16)
    except ValueError:
        raise SnapshotError("snapshot trailer is malformed") from None
    if zlib.crc32(body) != expected_crc:
        raise SnapshotError("snapshot checksum mismatch")
    store = Store(expire_done_default=expire_done_default, lock_timeouts_s=lock_timeouts_s, rng=rng,
                  policies=policies, keep_done_total=keep_done_total)
    count = 0
    for command in replay.iter_records(body):
        reply = replay.apply(store, command, now)
        if not reply.startswith(b"200"):
            raise SnapshotError(f"snapshot record does not apply: {reply!r}")
        count += 1
    if fields[1] != b"%d" % count:
        raise SnapshotError(f"snapshot announces {fields[1]!r} records, holds {count}")
    store.drain_changes()  # rebuilt, not changed: nothing to log
    store.woken.clear()
    store.idled.clear()
    return store
