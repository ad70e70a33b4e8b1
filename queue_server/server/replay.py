"""Reading SYNC records from bytes and applying them to a store (log, snapshot, replication)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from queue_server.protocol import commands as protocol
from queue_server.protocol import finished as fin
from queue_server.protocol import jobs as pj
from queue_server.protocol import sync_records as sr
from queue_server.protocol.errors import ProtocolError
from queue_server.protocol.framing import FrameReader
from queue_server.protocol.keyed import Errors, JobMeta, Meta, decode_errors
from queue_server.server.errors import SnapshotError
from queue_server.server.responses import OK, done_reply, item_reply, later_reply
from queue_server.server.store import Store

SyncCommand = (
    sr.SyncPut | sr.SyncGet | sr.SyncDone | sr.SyncLater
    | sr.SyncWake | sr.SyncIds
    | pj.SyncFail | pj.SyncTouch | pj.SyncKeyed | pj.SyncDead | fin.SyncKept | fin.SyncPrune
)
SYNC_TYPES = (
    sr.SyncPut, sr.SyncGet, sr.SyncDone, sr.SyncLater,
    sr.SyncWake, sr.SyncIds, pj.SyncFail, pj.SyncTouch, pj.SyncKeyed, pj.SyncDead, fin.SyncKept,
    fin.SyncPrune,
)
_NOT_FOUND = b"404 Job Not Found\r\n"


def iter_records(buffer: bytes | memoryview) -> Iterator[SyncCommand]:
    """Every SYNC record in `buffer`; raises SnapshotError at the first bad byte."""
    reader = FrameReader(None, bytes(buffer))
    while reader.unread():
        position = reader.position
        command = _take_record(reader)
        if reader.position == position:
            if reader.buffer.find(b"\n", position) < 0:
                raise SnapshotError(f"record at byte {position} has no line end")
            raise SnapshotError(f"record data cut short at byte {position}")
        if command is not None:
            yield command


def parse_records(view: bytes, position: int = 0) -> tuple[list[SyncCommand], int]:
    """The complete SYNC records from `position` on, and where the first incomplete one
    starts (a stream: the rest comes later). Raises SnapshotError at a bad record."""
    reader = FrameReader(None, view)
    reader.position = position
    return take_records(reader), reader.position


def take_records(reader: FrameReader) -> list[SyncCommand]:
    """The complete SYNC records the reader holds; it is left at the first incomplete one.
    Raises SnapshotError at a bad record."""
    commands: list[SyncCommand] = []
    while reader.unread():
        position = reader.position
        command = _take_record(reader)
        if reader.position == position:
            break
        if command is not None:
            commands.append(command)
    return commands


def _take_record(reader: FrameReader) -> SyncCommand | None:
    """The next record; None with the reader unmoved when it is not complete yet, None
    past it for an empty line."""
    position = reader.position
    line = reader.line()
    if line is None:
        return None
    line = line.rstrip(b"\r")  # a record written by hand may end in several CRs
    after = reader.position
    if not line:
        return None
    try:
        parsed = protocol.parse_line(line)
    except ProtocolError as error:
        raise SnapshotError(f"bad record at byte {after}: {error}") from None
    command = parsed.command
    if parsed.error is not None or not isinstance(command, SYNC_TYPES):
        raise SnapshotError(f"not a SYNC record before byte {after}: {line[:60]!r}")
    if parsed.data_len >= 0:
        data = reader.block(parsed.data_len)
        if data is None:
            reader.position = position
            return None
        assert isinstance(command, (sr.SyncPut, pj.SyncFail, pj.SyncDead, sr.SyncDone, fin.SyncKept))
        command.data = data
    return command


def _split_errors(data: bytes, error_len: int, errors_len: int, attempts: int,
                  failed_at: float | None) -> tuple[bytes, Errors]:
    """A record's block: the job's data, then its error history (ERRORS, JSON), or its last
    error alone (ERROR, version 2: its attempt taken as the job's count, its time 0 if none)."""
    if errors_len >= 0:
        cut = len(data) - errors_len
        try:
            return data[:cut], decode_errors(data[cut:])
        except (ValueError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"bad ERRORS block: {exc}") from None
    if error_len < 0:
        return data, ()
    cut = len(data) - error_len
    text = data[cut:].decode("utf-8", "replace")
    return data[:cut], ((failed_at if failed_at is not None else 0.0, attempts, text),)


def _put(store: Store, command: sr.SyncPut, now: float) -> bytes:
    data, errors = _split_errors(command.data, command.error_len, command.errors_len,
                                 command.attempts, command.failed_at)
    meta: Meta = command.attempts
    if errors or command.solo or command.retry_wait or command.trace is not None:
        meta = JobMeta(command.attempts, errors, command.solo, command.retry_wait, command.trace)
    if command.until is not None:
        store.put(command.queue, command.priority, data, command.item, now,
                  until=command.until, replaying=True, key=command.key, meta=meta,
                  ttl_at=command.ttl_at)
        return OK
    until = now + command.delay_s if command.delay_s is not None else None
    item = store.new_item_name() if command.new_item else command.item
    store.put(command.queue, command.priority, data, item, now, until=until, key=command.key, meta=meta,
              ttl_at=command.ttl_at)
    return item_reply(OK, item) if command.new_item else OK  # type: ignore[arg-type]


def _keyed(store: Store, command: pj.SyncKeyed, now: float) -> bytes:
    if command.verb == b"RETRY":
        store.retry(command.queue, command.keys, now)
    elif command.verb == b"DELETE":
        store.delete(command.queue, command.keys)
    elif command.verb == b"TTL":
        store.drop_ttl(command.queue, command.keys)
    else:
        store.drop(command.queue, command.keys)
    return OK


def _get(store: Store, command: sr.SyncGet, now: float) -> bytes:
    found = store.sync_get(command.queue, command.job_id, command.priority, now, last=command.last,
                           until=command.until, then_done=command.then_done, managed=command.managed,
                           at=command.at, by=command.by)
    return OK if found else b"404 Queue Empty\r\n"


def _done(store: Store, command: sr.SyncDone, now: float) -> bytes:
    result = command.data if command.with_result else command.large
    return done_reply(store.done(command.ids, command.door, result, at=command.at))


def _later(store: Store, command: sr.SyncLater, now: float) -> bytes:
    return later_reply(store.later(command.ids, now, command.until, replaying=True, solo=command.solo,
                                   front=command.front))


def _wake(store: Store, command: sr.SyncWake, now: float) -> bytes:
    store.wake(command.until, now)
    return OK


def _ids(store: Store, command: sr.SyncIds, now: float) -> bytes:
    store.set_counters(command.next_id, command.next_item, command.next_key)
    return OK


def _fail(store: Store, command: pj.SyncFail, now: float) -> bytes:
    found = store.fail(command.job_id, command.data, command.at, solo=command.solo,
                       dead=command.until is None, until=command.until, replaying=True)
    return _NOT_FOUND if found is False else OK


def _touch(store: Store, command: pj.SyncTouch, now: float) -> bytes:
    return OK if store.sync_touch(command.job_id, command.until) else _NOT_FOUND


def _dead(store: Store, command: pj.SyncDead, now: float) -> bytes:
    data, errors = _split_errors(command.data, command.error_len, command.errors_len,
                                 command.attempts, command.failed_at)
    store.bury_record(command.queue, command.priority, data, command.item, command.key,
                      command.attempts, errors, command.died_at, command.trace)
    return OK


def _kept(store: Store, command: fin.SyncKept, now: float) -> bytes:
    block = command.data
    result: bytes | int | None = command.large
    if command.result_len >= 0:
        result = block[len(block) - command.result_len:]
        block = block[:len(block) - command.result_len]
    data, errors = _split_errors(block, -1, command.errors_len, command.attempts, None)
    store.keep_record(command.queue, command.priority, data, command.item, command.key,
                      command.attempts, errors, command.trace, ready_at=command.ready_at,
                      started_at=command.started_at, done_at=command.done_at,
                      ran_by=command.ran_by, result=result)
    return OK


def _pruned(store: Store, at: float) -> bytes:
    store.prune_kept(at)
    return OK


# A SYNC record's type -> how it applies to a store (the log, snapshots, replicas).
_APPLY: dict[type, Callable[[Store, Any, float], bytes]] = {
    sr.SyncPut: _put, sr.SyncGet: _get, sr.SyncDone: _done,
    sr.SyncLater: _later, sr.SyncWake: _wake, sr.SyncIds: _ids,
    pj.SyncFail: _fail, pj.SyncTouch: _touch, pj.SyncKeyed: _keyed, pj.SyncDead: _dead,
    fin.SyncKept: _kept, fin.SyncPrune: lambda store, command, now: _pruned(store, command.at),
}


def apply(store: Store, command: SyncCommand, now: float) -> bytes:
    """Apply one SYNC command; returns its reply (without CRLF framing for multi-line)."""
    return _APPLY[type(command)](store, command, now)
