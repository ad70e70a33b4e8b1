"""Reading SYNC records from bytes and applying them to a store (log, snapshot, replication)."""
from __future__ import annotations

from collections.abc import Iterator

from queue_server import protocol
from queue_server.errors import ProtocolError, SnapshotError
from queue_server.responses import OK, done_reply, item_reply, later_reply
from queue_server.store import Store

SyncCommand = (
    protocol.SyncPut | protocol.SyncGet | protocol.SyncDone | protocol.SyncLater
    | protocol.SyncWake | protocol.SyncIds
)
SYNC_TYPES = (
    protocol.SyncPut, protocol.SyncGet, protocol.SyncDone, protocol.SyncLater,
    protocol.SyncWake, protocol.SyncIds,
)


def iter_records(buffer: bytes | memoryview) -> Iterator[SyncCommand]:
    """Every SYNC record in `buffer`; raises SnapshotError at the first bad byte."""
    view = bytes(buffer)
    position = 0
    while position < len(view):
        command, next_position = _parse_record(view, position)
        if next_position == position:
            if view.find(b"\n", position) < 0:
                raise SnapshotError(f"record at byte {position} has no line end")
            raise SnapshotError(f"record data cut short at byte {position}")
        position = next_position
        if command is not None:
            yield command


def parse_records(view: bytes, position: int = 0) -> tuple[list[SyncCommand], int]:
    """The complete SYNC records from `position` on, and where the first incomplete one
    starts (a stream: the rest comes later). Raises SnapshotError at a bad record."""
    commands: list[SyncCommand] = []
    while position < len(view):
        command, next_position = _parse_record(view, position)
        if next_position == position:
            break
        position = next_position
        if command is not None:
            commands.append(command)
    return commands, position


def _parse_record(view: bytes, position: int) -> tuple[SyncCommand | None, int]:
    """The record at `position` and the position after it; (None, position) when it is
    not complete yet, (None, after) for an empty line."""
    newline = view.find(b"\n", position)
    if newline < 0:
        return None, position
    line = view[position:newline].rstrip(b"\r")
    after = newline + 1
    if not line:
        return None, after
    try:
        parsed = protocol.parse_line(line)
    except ProtocolError as error:
        raise SnapshotError(f"bad record at byte {after}: {error}") from None
    command = parsed.command
    if parsed.error is not None or not isinstance(command, SYNC_TYPES):
        raise SnapshotError(f"not a SYNC record before byte {after}: {line[:60]!r}")
    if parsed.data_len >= 0:
        if after + parsed.data_len > len(view):
            return None, position
        assert isinstance(command, protocol.SyncPut)
        command.data = view[after:after + parsed.data_len]
        after += parsed.data_len
    return command, after


def apply(store: Store, command: SyncCommand, now: float) -> bytes:
    """Apply one SYNC command; returns its reply (without CRLF framing for multi-line)."""
    if isinstance(command, protocol.SyncPut):
        if command.until is not None:
            store.put(command.queue, command.priority, command.data, command.item, now,
                      until=command.until, replaying=True)
        else:
            until = now + command.delay_s if command.delay_s is not None else None
            item = store.new_item_name() if command.new_item else command.item
            store.put(command.queue, command.priority, command.data, item, now, until=until)
            if command.new_item:
                return item_reply(OK, item)  # type: ignore[arg-type]
        return OK
    if isinstance(command, protocol.SyncGet):
        found = store.sync_get(command.queue, command.job_id, command.priority, now,
                               last=command.last, until=command.until, then_done=command.then_done)
        return OK if found else b"404 Queue Empty\r\n"
    if isinstance(command, protocol.SyncDone):
        return done_reply(store.done(command.ids))
    if isinstance(command, protocol.SyncLater):
        return later_reply(store.later(command.ids, now, command.until, replaying=True))
    if isinstance(command, protocol.SyncWake):
        store.wake(command.until, now)
        return OK
    store.set_counters(command.next_id, command.next_item)
    return OK
