"""Encoding of SYNC records: the one form shared by the log, snapshots and replication."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from queue_server.protocol.keyed import JobMeta, Key, Meta, encode_errors, key_bytes

if TYPE_CHECKING:
    from queue_server.protocol.keyed import DeadJob
    from queue_server.server.store_types import Kept

_THEN = {True: b" THEN DONE", False: b" THEN LATER"}
_ID_TEXT = b"%d".__mod__  # a job id as a record writes it
# RETRY/DELETE/DROP of many keys are split so a record line stays far below 64 KiB.
KEYS_PER_RECORD = 256


def _time(value: float) -> bytes:
    return repr(value).encode("ascii")


time_text = _time


def micro_time(clock: float) -> tuple[float, bytes]:
    """A live operation's time cut to whole microseconds, and that time as a record writes it.

    Digits of an integer cost about 60% of repr(float) (5,500 against 9,100 instructions, callgrind,
    bench/RESULTS.md). The float is the one the text parses back to: `micro / 1e6` and
    float(b"<s>.<ffffff>") both give the double nearest the same exact decimal (micro < 2**53),
    so a replica and a replay hold the primary's times to the bit."""
    micro = int(clock * 1e6)
    return micro / 1e6, b"%d.%06d" % divmod(micro, 1_000_000)


def _meta(meta: Meta) -> tuple[bytes, bytes]:
    """(options, error block) of a waiting job's attempts and the errors of its last failures."""
    if type(meta) is int:
        return (b" ATTEMPTS %d" % meta if meta else b""), b""
    assert isinstance(meta, JobMeta)
    options = b" ATTEMPTS %d" % meta.attempts
    error = b""
    if meta.errors:
        error = encode_errors(meta.errors)
        options += b" ERRORS %d" % len(error)
    if meta.solo:
        options += b" SOLO"
    if meta.retry_wait:
        options += b" FAILED"
    if meta.trace is not None:
        options += b" TRACE " + meta.trace
    return options, error


def put(queue: str, priority: int, data: bytes, item: str | None, until: float | None,
        key: Key | None = None, meta: Meta = 0, ttl_at: float | None = None) -> bytes:
    """`SYNC PUT <q> <p> <len>[ IS <item>][ UNTIL <t>][ KEY <k>][ TTL <t>][ ATTEMPTS <n>]
    [ ERRORS <m>][ SOLO][ FAILED][ TRACE <traceparent>]` + data (+ the m bytes of its error history as JSON: <len>
    counts both). Without KEY the job gets the next server key (the replay makes the same
    one). TTL: the unix time it is deleted at unless handed out before."""
    if meta == 0 and key is None and item is None and until is None and ttl_at is None:  # hot
        return b"SYNC PUT %s %d %d\r\n" % (queue.encode(), priority, len(data)) + data
    options, error = (b"", b"") if meta == 0 else _meta(meta)
    head = b"SYNC PUT %s %d %d" % (queue.encode(), priority, len(data) + len(error))
    if item is not None:
        head += b" IS " + item.encode()
    if until is not None:
        head += b" UNTIL " + _time(until)
    if key is not None:
        head += b" KEY " + key_bytes(key)
    if ttl_at is not None:
        head += b" TTL " + _time(ttl_at)
    return head + options + b"\r\n" + data + error


def at(when: float) -> bytes:
    """A hand-out's ` AT <t>` option (0: unknown, none)."""
    return b" AT " + _time(when) if when else b""


GET_LINE = b"SYNC GET %s %d %d%s%s\r\n"
GET_LAST_LINE = b"SYNC GET LAST %s %d %d%s%s\r\n"


def get(queue: str, job_id: int, priority: int, last: bool, until: float | None, then_done: bool,
        managed: bool = False, handed_at: bytes = b"", by: bytes = b"") -> bytes:
    """`SYNC GET[ LAST] <q> <id> <p>[ UNTIL <t> THEN DONE|LATER][ AT <t>][ BY <name>][ MANAGED]`;
    `handed_at` (` AT <t>`) and `by` (` BY <name>`): when it was handed out and the taking
    connection's CLIENT NAME, so a replica and a replay know when it started and who runs it."""
    if until is None and not managed:  # hot: one formatting, no concatenation (store_core.py has it inline)
        return (GET_LAST_LINE if last else GET_LINE) % (queue.encode(), job_id, priority, handed_at, by)
    line = b"SYNC GET LAST %s %d %d" if last else b"SYNC GET %s %d %d"
    record = line % (queue.encode(), job_id, priority)
    if until is not None:
        record += b" UNTIL " + _time(until) + _THEN[then_done]
    record += handed_at + by
    if managed:
        record += b" MANAGED"
    return record + b"\r\n"


def done(ids: Sequence[int], at: bytes, door: str | None = None,
         result: bytes | int | None = None) -> bytes:
    """`SYNC DONE <id> ... AT <t>[ BY <door>][ RESULT <len>|LARGE <n>]` (+ the result): when
    they finished (`at`: micro_time's or time_text's), the connection that finished them, and
    DONE ... RESULT's result (or the size of one too large to keep), so a replay keeps the
    finished jobs as they were."""
    if len(ids) == 1:  # the hot case: one job per DONE
        if door is None and result is None:
            return b"SYNC DONE %d AT %s\r\n" % (ids[0], at)
        record = b"SYNC DONE %d AT %s" % (ids[0], at)
    else:
        record = b"SYNC DONE " + b" ".join(map(_ID_TEXT, ids)) + b" AT " + at  # (in C: a slot's batch)
    if door is not None:
        record += b" BY " + door.encode("ascii")
    if result is None:
        return record + b"\r\n"
    if isinstance(result, int):
        return record + b" LARGE %d\r\n" % result
    return record + b" RESULT %d\r\n" % len(result) + result


def later(ids: Iterable[int], until: float | None, solo: bool = False, front: bool = False) -> bytes:
    """`SYNC LATER <id> ...[ UNTIL <t>][ SOLO][ FRONT]`."""
    record = b"SYNC LATER " + b" ".join(b"%d" % job_id for job_id in ids)
    if until is not None:
        record += b" UNTIL " + _time(until)
    if solo:
        record += b" SOLO"
    if front:
        record += b" FRONT"
    return record + b"\r\n"


def fail(job_id: int, at: float, until: float | None, solo: bool, error: str) -> bytes:
    """`SYNC FAIL <id> AT <t> (UNTIL <t>|DEAD)[ SOLO] <len>` + the error (already capped)."""
    body = error.encode("utf-8")
    record = b"SYNC FAIL %d AT " % job_id + _time(at)
    record += b" DEAD" if until is None else b" UNTIL " + _time(until)
    if solo:
        record += b" SOLO"
    return record + b" %d\r\n" % len(body) + body


def touch(job_id: int, until: float) -> bytes:
    return b"SYNC TOUCH %d " % job_id + _time(until) + b"\r\n"


def keyed(verb: bytes, queue: str, keys: Sequence[Key]) -> bytes:
    """`SYNC RETRY|DELETE|DROP|TTL <q> <key> ...`."""
    return b"SYNC %s %s %s\r\n" % (verb, queue.encode(), b" ".join(key_bytes(k) for k in keys))


def dead(job: DeadJob) -> bytes:
    """`SYNC DEAD <q> <p> <len> KEY <k> ATTEMPTS <n> DIED <t>[ IS <item>][ ERRORS <m>][ TRACE <tp>]`
    + data + its error history as JSON (snapshots)."""
    error = encode_errors(job.errors) if job.errors else b""
    head = b"SYNC DEAD %s %d %d KEY %s ATTEMPTS %d DIED %s" % (
        job.queue.encode(), job.priority, len(job.data) + len(error), key_bytes(job.key),
        job.attempts, _time(job.died_at))
    if job.item is not None:
        head += b" IS " + job.item.encode()
    if job.errors:
        head += b" ERRORS %d" % len(error)
    if job.trace is not None:
        head += b" TRACE " + job.trace
    return head + b"\r\n" + job.data + error


def kept(entry: Kept) -> bytes:
    """`SYNC KEPT <q> <p> <len> KEY <k> ATTEMPTS <n> READY <t> DONE <t>[ STARTED <t>][ IS <item>]
    [ BY <door>][ ERRORS <m>][ RESULT <r>|LARGE <n>][ TRACE <tp>]` + data + errors + result: a
    finished job kept (snapshots). STARTED: when it was handed out (left out when unknown: a
    hand-out logged before issue 26)."""
    key, queue, priority, data, item, attempts, errors, trace, ready_at, started_at, done_at, ran_by, result = entry
    error = encode_errors(errors) if errors else b""
    kept_result = result if isinstance(result, bytes) else b""
    head = b"SYNC KEPT %s %d %d KEY %s ATTEMPTS %d READY %s DONE %s" % (
        queue.encode(), priority, len(data) + len(error) + len(kept_result),
        key_bytes(key), attempts, _time(ready_at), _time(done_at))
    if started_at:
        head += b" STARTED " + _time(started_at)
    if item is not None:
        head += b" IS " + item.encode()
    if ran_by is not None:
        head += b" BY " + ran_by.encode("ascii")
    if error:
        head += b" ERRORS %d" % len(error)
    if isinstance(result, bytes):
        head += b" RESULT %d" % len(result)
    elif isinstance(result, int):
        head += b" LARGE %d" % result
    if trace is not None:
        head += b" TRACE " + trace
    return head + b"\r\n" + data + error + kept_result


def prune(now: float) -> bytes:
    """`SYNC PRUNE <unix>`: the finished jobs past their keep_done_s at that time went."""
    return b"SYNC PRUNE " + _time(now) + b"\r\n"


def wake(until: float) -> bytes:
    return b"SYNC WAKE " + _time(until) + b"\r\n"


def ids(next_id: int, next_item: int, next_key: int = 1) -> bytes:
    return b"SYNC IDS %d %d %d\r\n" % (next_id, next_item, next_key)
