"""SYNC records as commands: the replication and log form of every change (times are
absolute unix seconds); parsed by commands.py's SYNC entry, applied by server/replay.py."""
from __future__ import annotations

from dataclasses import dataclass

from queue_server.protocol import jobs as pj
from queue_server.protocol.errors import bad_request
from queue_server.protocol.fields import NEW_KEYWORD, keyword_values, parse_name, parse_then
from queue_server.protocol.keyed import Key
from queue_server.protocol.numbers import (
    parse_id,
    parse_priority,
    parse_seconds,
    parse_uint,
    parse_unix_time,
)


@dataclass(slots=True)
class SyncPut:
    queue: str
    priority: int
    item: str | None
    until: float | None
    delay_s: float | None = None  # relative, from a primary that sent DELAY
    new_item: bool = False
    key: Key | None = None  # None: the next server key
    attempts: int = 0
    error_len: int = -1  # >= 0: the block ends with this many bytes of the last error
    failed_at: float | None = None
    solo: bool = False
    retry_wait: bool = False  # FAILED: delayed by a failure
    data: bytes = b""
    ttl_at: float | None = None  # TTL <unix>: deleted then unless handed out before
    errors_len: int = -1  # >= 0: the block ends with its error history (ERRORS, JSON; version 3)
    trace: bytes | None = None  # TRACE <traceparent>, as the producer's PUT gave it


@dataclass(slots=True)
class SyncGet:
    queue: str
    job_id: int
    priority: int
    last: bool
    until: float | None
    then_done: bool | None
    managed: bool = False
    at: float = 0.0  # AT: when the primary handed it out (0: a record from before issue 26)
    by: str | None = None  # BY: the taking connection's CLIENT NAME (None: unnamed, or an older record)


@dataclass(slots=True)
class SyncDone:
    ids: tuple[int, ...]
    at: float | None = None  # when they finished (None: a log from before finished jobs were kept)
    door: str | None = None  # BY: the finishing connection's CLIENT NAME
    large: int | None = None  # LARGE <n>: a result of n bytes that was not kept
    with_result: bool = False  # RESULT <len>: `data` is the one job's result
    data: bytes = b""


@dataclass(slots=True)
class SyncLater:
    ids: tuple[int, ...]
    until: float | None
    solo: bool = False
    front: bool = False


@dataclass(slots=True)
class SyncWake:
    until: float


@dataclass(slots=True)
class SyncIds:
    next_id: int
    next_item: int
    next_key: int = 1


_SYNC_PUT_FLAGS = frozenset((NEW_KEYWORD, b"SOLO", b"FAILED"))
_SYNC_PUT_VALUES = frozenset((b"IS", b"UNTIL", b"DELAY", b"KEY", b"ATTEMPTS", b"ERROR", b"AT", b"TTL",
                              b"ERRORS", b"TRACE"))


def parse_sync_put(rest: list[bytes], data_len: int) -> SyncPut:
    """As PUT (IS / NEW / DELAY), plus UNTIL <unix time>, KEY, ATTEMPTS, ERRORS <len> (ERROR
    <len> [AT <t>] before version 3), SOLO, FAILED; a replica never waits (no WAIT)."""
    options = [arg for arg in rest[3:] if arg not in _SYNC_PUT_FLAGS]
    flags = [arg for arg in rest[3:] if arg in _SYNC_PUT_FLAGS]
    if len(set(flags)) != len(flags):
        raise bad_request("a flag given twice")
    new_item = NEW_KEYWORD in flags
    values = keyword_values(options, _SYNC_PUT_VALUES)
    item = parse_name(values[b"IS"], "item name") if b"IS" in values else None
    if item is not None and new_item:
        raise bad_request("IS and NEW together")
    until = parse_unix_time(values[b"UNTIL"]) if b"UNTIL" in values else None
    delay_s = parse_seconds(values[b"DELAY"], "DELAY") if b"DELAY" in values else None
    error_len, errors_len = pj.error_lengths(values, data_len)
    return SyncPut(
        parse_name(rest[0]), parse_priority(rest[1]), item, until, delay_s, new_item,
        pj.parse_job_key(values[b"KEY"]) if b"KEY" in values else None,
        parse_uint(values[b"ATTEMPTS"], "ATTEMPTS") if b"ATTEMPTS" in values else 0,
        error_len, parse_unix_time(values[b"AT"]) if b"AT" in values else None,
        b"SOLO" in flags, b"FAILED" in flags,
        ttl_at=parse_unix_time(values[b"TTL"]) if b"TTL" in values else None,
        errors_len=errors_len,
        trace=pj.parse_trace(values[b"TRACE"]) if b"TRACE" in values else None,
    )


_SYNC_GET_VALUES = frozenset((b"UNTIL", b"THEN", b"AT", b"BY"))


def parse_sync_get(rest: list[bytes]) -> SyncGet:
    last = bool(rest) and rest[0] == b"LAST"
    if last:
        rest = rest[1:]
    managed = rest[-1:] == [b"MANAGED"]
    if managed:
        rest = rest[:-1]
    if len(rest) < 3:
        raise bad_request("SYNC GET [LAST] <q> <id> <p> expected")
    values = keyword_values(rest[3:], _SYNC_GET_VALUES)
    until = parse_unix_time(values[b"UNTIL"]) if b"UNTIL" in values else None
    then_done = parse_then(values[b"THEN"]) if b"THEN" in values else None
    return SyncGet(parse_name(rest[0]), parse_id(rest[1]), parse_priority(rest[2]), last, until,
                   then_done, managed, parse_unix_time(values[b"AT"]) if b"AT" in values else 0.0,
                   pj.parse_door(values[b"BY"]) if b"BY" in values else None)
