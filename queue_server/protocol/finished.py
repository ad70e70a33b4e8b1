"""Finished jobs on the wire (PROTOCOL.md Part B "Finished jobs and results"): DONE ...
RESULT, RESULT <q> <key>, and the records that keep them (SYNC DONE ... AT, SYNC KEPT)."""
from __future__ import annotations

from dataclasses import dataclass

from queue_server.protocol.errors import bad_request
from queue_server.protocol.fields import parse_name
from queue_server.protocol.jobs import (
    error_lengths,
    parse_door,
    parse_job_key,
    parse_trace,
)
from queue_server.protocol.keyed import Key
from queue_server.protocol.numbers import (
    parse_id,
    parse_length,
    parse_priority,
    parse_seconds,
    parse_uint,
    parse_unix_time,
)
from queue_server.protocol.sync_records import SyncDone

# RESULT waits at most this long per request: a client that wants longer asks again (a
# client's connection then never holds a wait past what its own timeouts expect).
MAX_RESULT_WAIT_S = 3600.0


@dataclass(slots=True)
class DoneWithResult:
    """`DONE <id> RESULT <len>` CRLF `<result>`: one job finished, with what it returned; or
    `DONE <id> LARGE <n>`: with a result of n bytes, too large to send (over max_job_bytes)."""

    job_id: int
    data: bytes = b""
    large: int | None = None


@dataclass(slots=True)
class ResultWait:
    """`RESULT <q> <key> [TIMEOUT <s>]`: the job's JSON once it has finished or died, or as
    it is when TIMEOUT (default 0: at once) runs out."""

    queue: str
    key: Key
    timeout_s: float = 0.0


@dataclass(slots=True)
class SyncKept:
    queue: str
    priority: int
    key: Key
    attempts: int
    ready_at: float
    done_at: float
    started_at: float = 0.0
    item: str | None = None
    ran_by: str | None = None
    errors_len: int = -1
    result_len: int = -1
    large: int | None = None  # LARGE <n>: a result of n bytes, not kept
    trace: bytes | None = None
    data: bytes = b""


@dataclass(slots=True)
class SyncPrune:
    """`SYNC PRUNE <unix>`: the finished jobs kept past their queue's keep_done_s at that time go."""

    at: float


def parse_done(args: list[bytes]) -> tuple[DoneWithResult, int]:
    """`DONE <id> RESULT <len>` -> (command, len); `DONE <id> LARGE <n>` -> (command, -1: no block)."""
    if len(args) == 3 and args[1] == b"LARGE":
        return DoneWithResult(parse_id(args[0]), large=parse_uint(args[2], "LARGE")), -1
    if len(args) != 3 or args[1] != b"RESULT":
        raise bad_request("DONE <id> RESULT <len> or DONE <id> LARGE <n> expected")
    return DoneWithResult(parse_id(args[0])), parse_length(args[2])


def parse_result(args: list[bytes]) -> ResultWait:
    if len(args) not in (2, 4) or (len(args) == 4 and args[2] != b"TIMEOUT"):
        raise bad_request("RESULT <q> <key> [TIMEOUT <sec>] expected")
    timeout_s = parse_seconds(args[3], "TIMEOUT") if len(args) == 4 else 0.0
    if timeout_s > MAX_RESULT_WAIT_S:
        raise bad_request(f"TIMEOUT is at most {MAX_RESULT_WAIT_S:g} s")
    return ResultWait(parse_name(args[0]), parse_job_key(args[1]), timeout_s)


def parse_sync_done(rest: list[bytes]) -> tuple[SyncDone, int]:
    """`SYNC DONE <id> ...[ AT <t>][ BY <door>][ RESULT <len>|LARGE <n>]` -> (record, block length
    or -1). Without AT (a log written before finished jobs were kept) the replay's clock is used."""
    cut = next((i for i, raw in enumerate(rest) if not raw.isdigit()), len(rest))
    if not cut:
        raise bad_request("job id expected")
    record = SyncDone(tuple(parse_id(raw) for raw in rest[:cut]))
    options = rest[cut:]
    values = dict(zip(options[::2], options[1::2], strict=False))
    if len(options) % 2 or len(values) != len(options) // 2 or not values.keys() <= {
            b"AT", b"BY", b"RESULT", b"LARGE"}:
        raise bad_request("SYNC DONE <id> ... [AT <t>] [BY <door>] [RESULT <len>|LARGE <n>] expected")
    if b"AT" in values:
        record.at = parse_unix_time(values[b"AT"])
    if b"BY" in values:
        record.door = parse_door(values[b"BY"])
    if b"LARGE" in values:
        record.large = parse_uint(values[b"LARGE"], "LARGE")
    if b"RESULT" not in values:
        return record, -1
    if len(record.ids) != 1 or record.large is not None:
        raise bad_request("SYNC DONE ... RESULT names one job and no LARGE")
    record.with_result = True
    return record, parse_length(values[b"RESULT"])


_KEPT_VALUES = frozenset((b"KEY", b"ATTEMPTS", b"READY", b"DONE", b"STARTED", b"IS", b"BY", b"ERRORS",
                          b"RESULT", b"LARGE", b"TRACE"))


def parse_sync_kept(rest: list[bytes]) -> tuple[SyncKept, int]:
    """`SYNC KEPT <q> <p> <len> KEY <k> ATTEMPTS <n> READY <t> DONE <t>[ STARTED <t>][ IS <item>]
    [ BY <door>][ ERRORS <m>][ RESULT <r>|LARGE <n>][ TRACE <tp>]` (snapshots)."""
    if len(rest) < 11:
        raise bad_request("SYNC KEPT <q> <p> <len> KEY <k> ATTEMPTS <n> READY <t> DONE <t> ... expected")
    data_len = parse_length(rest[2])
    values = dict(zip(rest[3::2], rest[4::2], strict=False))
    if (len(rest[3:]) % 2 or len(values) != len(rest[3:]) // 2
            or not {b"KEY", b"ATTEMPTS", b"READY", b"DONE"} <= values.keys() <= _KEPT_VALUES
            or {b"RESULT", b"LARGE"} <= values.keys()):
        raise bad_request("bad SYNC KEPT options")
    _error_len, errors_len = error_lengths({k: v for k, v in values.items() if k == b"ERRORS"}, data_len)
    result_len = parse_length(values[b"RESULT"]) if b"RESULT" in values else -1
    if max(errors_len, 0) + max(result_len, 0) > data_len:
        raise bad_request("SYNC KEPT: ERRORS and RESULT longer than the block")
    return SyncKept(
        parse_name(rest[0]), parse_priority(rest[1]), parse_job_key(values[b"KEY"]),
        parse_uint(values[b"ATTEMPTS"], "ATTEMPTS"), parse_unix_time(values[b"READY"]),
        parse_unix_time(values[b"DONE"]),
        parse_unix_time(values[b"STARTED"]) if b"STARTED" in values else 0.0,
        parse_name(values[b"IS"], "item name") if b"IS" in values else None,
        parse_door(values[b"BY"]) if b"BY" in values else None,
        errors_len, result_len,
        parse_uint(values[b"LARGE"], "LARGE") if b"LARGE" in values else None,
        parse_trace(values[b"TRACE"]) if b"TRACE" in values else None,
    ), data_len
