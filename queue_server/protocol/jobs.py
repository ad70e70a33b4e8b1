"""Pure parsing of the keyed-job commands (PROTOCOL.md Part B) and their SYNC records:
FAIL, TOUCH, JOB, JOBS, RETRY, DELETE; SYNC FAIL/TOUCH/RETRY/DELETE/DROP/DEAD."""
from __future__ import annotations

import re
from dataclasses import dataclass

from queue_server.protocol.errors import ProtocolError, bad_request
from queue_server.protocol.fields import parse_name
from queue_server.protocol.job_positions import ListPosition, parse_position
from queue_server.protocol.job_search import JobsSearch, check_search, parse_search_word
from queue_server.protocol.keyed import KEY_RE, TRACEPARENT_RE, Key, parse_key
from queue_server.protocol.numbers import (
    parse_bounded,
    parse_id,
    parse_ids,
    parse_length,
    parse_priority,
    parse_seconds,
    parse_uint,
    parse_unix_time,
)

JOB_STATES = frozenset((b"ready", b"delayed", b"failed", b"running", b"dead", b"done"))
JOBS_LIMIT_DEFAULT = 100
JOBS_LIMIT_MAX = 1000
DOOR_RE = re.compile(rb"[A-Za-z0-9_.:-]{1,64}")


def parse_job_key(raw: bytes) -> Key:
    if KEY_RE.fullmatch(raw) is None:
        raise bad_request("bad job key")
    return parse_key(raw)


def parse_trace(raw: bytes) -> bytes:
    """PUT ... TRACE / SYNC PUT ... TRACE: a W3C traceparent, kept byte for byte."""
    if TRACEPARENT_RE.fullmatch(raw) is None:
        raise bad_request("TRACE must be a W3C traceparent 00-<32 hex>-<16 hex>-<2 hex> "
                          "(lower case, ids not all zeros)")
    return raw


def parse_job_keys(raws: list[bytes]) -> tuple[Key, ...]:
    if not raws:
        raise bad_request("job key expected")
    return tuple(parse_job_key(raw) for raw in raws)


@dataclass(slots=True)
class Fail:
    job_id: int
    delay_s: float | None
    dead: bool
    solo: bool
    data: bytes = b""  # the error text


@dataclass(frozen=True, slots=True)
class Touch:
    ids: tuple[int, ...]
    expire_s: float | None


@dataclass(frozen=True, slots=True)
class JobLookup:
    key: Key
    errors: bool = False  # JOB <key> ERRORS: with the job's error history


@dataclass(frozen=True, slots=True)
class JobsList:
    queue: str
    state: str
    limit: int
    after: Key | None
    search: JobsSearch | None = None  # PREFIX/ERROR/SINCE/UNTIL/SCAN: a bounded search (job_search.py)
    at: ListPosition | None = None  # AT: where AFTER stood in the listing (job_positions.py)


@dataclass(frozen=True, slots=True)
class Retry:
    queue: str
    keys: tuple[Key, ...]
    all_of: str | None  # "dead" / "failed": RETRY <q> ALL DEAD|FAILED


@dataclass(frozen=True, slots=True)
class Delete:
    queue: str
    keys: tuple[Key, ...]
    all_dead: bool


@dataclass(frozen=True, slots=True)
class Cancel:
    """CANCEL <q> <key> (Part B): a waiting job removed, a running one ends dead."""
    queue: str
    key: Key


@dataclass(frozen=True, slots=True)
class ClientName:
    """CLIENT NAME <name>: which door (cli, dashboard, api, ...) this connection is."""

    name: str


# SYNC records of the keyed commands (times are absolute unix seconds).
@dataclass(slots=True)
class SyncFail:
    job_id: int
    at: float
    until: float | None  # None: dead
    solo: bool
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class SyncTouch:
    job_id: int
    until: float


@dataclass(frozen=True, slots=True)
class SyncKeyed:
    """SYNC RETRY / SYNC DELETE / SYNC DROP / SYNC TTL <q> <key> ..."""

    verb: bytes
    queue: str
    keys: tuple[Key, ...]


@dataclass(slots=True)
class SyncDead:
    queue: str
    priority: int
    key: Key
    attempts: int
    died_at: float
    item: str | None
    error_len: int
    failed_at: float | None
    data: bytes = b""  # the job's data, then error_len bytes of its last error
    errors_len: int = -1  # or errors_len bytes of its error history (ERRORS, version 3)
    trace: bytes | None = None  # PUT ... TRACE


def parse_fail(args: list[bytes]) -> tuple[Fail | None, int, ProtocolError | None]:
    """`FAIL <id> [DELAY <s>] [DEAD] [SOLO] <len>`: (command, len, error); the block is
    consumed even when the rest is bad (PROTOCOL.md fine point 1)."""
    if len(args) < 2:
        raise bad_request("FAIL <id> [DELAY <s>] [DEAD] [SOLO] <len> expected")
    data_len = parse_length(args[-1])
    try:
        job_id = parse_id(args[0])
        delay_s = None
        flags: set[bytes] = set()
        rest = args[1:-1]
        index = 0
        while index < len(rest):
            word = rest[index]
            if word in flags or (word == b"DELAY" and delay_s is not None):
                raise bad_request(f"{word.decode('ascii', 'replace')} given twice")
            if word == b"DELAY" and index + 1 < len(rest):
                delay_s = parse_seconds(rest[index + 1], "DELAY")
                index += 2
                continue
            if word not in (b"DEAD", b"SOLO"):
                raise bad_request(f"unexpected {word.decode('ascii', 'replace')}")
            flags.add(word)
            index += 1
        if delay_s is not None and b"DEAD" in flags:
            raise bad_request("DELAY and DEAD together")
        return Fail(job_id, delay_s, b"DEAD" in flags, b"SOLO" in flags), data_len, None
    except ProtocolError as error:
        return None, data_len, error


def parse_touch(args: list[bytes]) -> Touch:
    expire_s = None
    if len(args) >= 2 and args[-2] == b"EXPIRE":
        expire_s = parse_seconds(args[-1], "EXPIRE")
        args = args[:-2]
    return Touch(parse_ids(args), expire_s)


def parse_job(args: list[bytes]) -> JobLookup:
    if len(args) == 2 and args[1] == b"ERRORS":
        return JobLookup(parse_job_key(args[0]), errors=True)
    if len(args) != 1:
        raise bad_request("JOB <key> [ERRORS] expected")
    return JobLookup(parse_job_key(args[0]))


def parse_jobs(args: list[bytes]) -> JobsList:
    if len(args) < 2:
        raise bad_request("JOBS <q> <state> [LIMIT <n>] [AFTER <key> [AT <position>]] [PREFIX <p>] "
                          "[ERROR <type>] [SINCE <unix>] [UNTIL <unix>] [SCAN <n>] expected")
    queue = parse_name(args[0])
    if args[1] not in JOB_STATES:
        raise bad_request("state must be ready, delayed, failed, running, dead or done")
    limit = JOBS_LIMIT_DEFAULT
    after: Key | None = None
    at: ListPosition | None = None
    search: JobsSearch | None = None
    rest = args[2:]
    if len(rest) % 2:
        raise bad_request(f"{rest[-1].decode('ascii', 'replace')} needs a value")
    seen: set[bytes] = set()
    for index in range(0, len(rest), 2):
        word, value = rest[index], rest[index + 1]
        if word in seen:
            raise bad_request(f"{word.decode('ascii', 'replace')} given twice")
        seen.add(word)
        if word == b"LIMIT":
            limit = parse_bounded(value, "LIMIT", 1, JOBS_LIMIT_MAX)
        elif word == b"AFTER":
            after = parse_job_key(value)
        elif word == b"AT":
            at = parse_position(args[1].decode("ascii"), value)
        else:
            search = parse_search_word(search or JobsSearch(), word, value)
            if search is None:
                raise bad_request(f"unexpected {word.decode('ascii', 'replace')}")
    state = args[1].decode("ascii")
    if search is not None:
        check_search(state, search)
    if at is not None and after is None:
        raise bad_request("AT needs AFTER (the key of the row it is the position of)")
    return JobsList(queue, state, limit, after, search, at)


def parse_retry(args: list[bytes]) -> Retry:
    if len(args) < 2:
        raise bad_request("RETRY <q> (<key> ... | ALL DEAD | ALL FAILED) expected")
    queue = parse_name(args[0])
    if args[1] == b"ALL":
        if args[2:] == [b"DEAD"]:
            return Retry(queue, (), "dead")
        if args[2:] == [b"FAILED"]:
            return Retry(queue, (), "failed")
        raise bad_request("RETRY <q> ALL DEAD or ALL FAILED expected")
    return Retry(queue, parse_job_keys(args[1:]), None)


def parse_delete(args: list[bytes]) -> Delete:
    if len(args) < 2:
        raise bad_request("DELETE <q> (<key> ... | ALL DEAD) expected")
    queue = parse_name(args[0])
    if args[1] == b"ALL":
        if args[2:] != [b"DEAD"]:
            raise bad_request("DELETE <q> ALL DEAD expected")
        return Delete(queue, (), True)
    return Delete(queue, parse_job_keys(args[1:]), False)


def parse_cancel(args: list[bytes]) -> Cancel:
    if len(args) != 2:
        raise bad_request("CANCEL <q> <key> expected")
    return Cancel(parse_name(args[0]), parse_job_keys(args[1:])[0])


def slot_of(door: str | None) -> tuple[str, int] | None:
    """(host, slot id) of a slot's CLIENT NAME `slot.<host>.<slot id>` (slot/process.py
    slot_door; a host name may hold dots), None for any other name."""
    if door is None or not door.startswith("slot."):
        return None
    host, _, slot_id = door[5:].rpartition(".")
    if not host or not slot_id.isdigit():
        return None
    return host, int(slot_id)


def parse_door(raw: bytes) -> str:
    """A record's `BY <name>`: a CLIENT NAME."""
    if DOOR_RE.fullmatch(raw) is None:
        raise bad_request("bad BY door")
    return raw.decode("ascii")


def parse_client(args: list[bytes]) -> ClientName:
    if len(args) != 2 or args[0] != b"NAME":
        raise bad_request("CLIENT NAME <name> expected")
    if DOOR_RE.fullmatch(args[1]) is None:
        raise bad_request("a client name is 1..64 of A-Z a-z 0-9 _ . : -")
    return ClientName(args[1].decode("ascii"))


def parse_sync_fail(rest: list[bytes]) -> tuple[SyncFail, int]:
    """`SYNC FAIL <id> AT <t> (UNTIL <t>|DEAD)[ SOLO] <len>`."""
    if len(rest) < 5 or rest[1] != b"AT":
        raise bad_request("SYNC FAIL <id> AT <t> (UNTIL <t>|DEAD) [SOLO] <len> expected")
    data_len = parse_length(rest[-1])
    job_id = parse_id(rest[0])
    at = parse_unix_time(rest[2])
    options = rest[3:-1]
    solo = options[-1:] == [b"SOLO"]
    if solo:
        options = options[:-1]
    if options == [b"DEAD"]:
        until = None
    elif len(options) == 2 and options[0] == b"UNTIL":
        until = parse_unix_time(options[1])
    else:
        raise bad_request("SYNC FAIL needs UNTIL <t> or DEAD")
    return SyncFail(job_id, at, until, solo), data_len


def parse_sync_touch(rest: list[bytes]) -> SyncTouch:
    if len(rest) != 2:
        raise bad_request("SYNC TOUCH <id> <until> expected")
    return SyncTouch(parse_id(rest[0]), parse_unix_time(rest[1]))


def parse_sync_keyed(verb: bytes, rest: list[bytes]) -> SyncKeyed:
    if len(rest) < 2:
        raise bad_request(f"SYNC {verb.decode()} <q> <key> ... expected")
    return SyncKeyed(verb, parse_name(rest[0]), parse_job_keys(rest[1:]))


def error_lengths(values: dict[bytes, bytes], data_len: int) -> tuple[int, int]:
    """(ERROR <m>, ERRORS <m>) of a SYNC PUT/DEAD, -1 when absent: the block's last m bytes
    are the last error (version 2) or the error history as JSON (version 3), not both."""
    error_len = parse_length(values[b"ERROR"]) if b"ERROR" in values else -1
    errors_len = parse_length(values[b"ERRORS"]) if b"ERRORS" in values else -1
    if error_len >= 0 and errors_len >= 0:
        raise bad_request("ERROR and ERRORS together")
    if max(error_len, errors_len) > data_len:
        raise bad_request("ERROR longer than the block")
    return error_len, errors_len


def parse_sync_dead(rest: list[bytes]) -> tuple[SyncDead, int]:
    """`SYNC DEAD <q> <p> <len> KEY <k> ATTEMPTS <n> DIED <t>[ IS <item>][ ERRORS <m>][ TRACE <tp>]` (or
    ERROR <m>[ AT <t>] before version 3)."""
    if len(rest) < 9:
        raise bad_request("SYNC DEAD <q> <p> <len> KEY <k> ATTEMPTS <n> DIED <t> ... expected")
    data_len = parse_length(rest[2])
    values = dict(zip(rest[3::2], rest[4::2], strict=False))
    if len(rest[3:]) % 2 or len(values) != len(rest[3:]) // 2 or not {b"KEY", b"ATTEMPTS", b"DIED"} <= values.keys():
        raise bad_request("bad SYNC DEAD options")
    if not values.keys() <= {b"KEY", b"ATTEMPTS", b"DIED", b"IS", b"ERROR", b"AT", b"ERRORS", b"TRACE"}:
        raise bad_request("unexpected SYNC DEAD option")
    error_len, errors_len = error_lengths(values, data_len)
    return SyncDead(
        parse_name(rest[0]), parse_priority(rest[1]), parse_job_key(values[b"KEY"]),
        parse_uint(values[b"ATTEMPTS"], "ATTEMPTS"), parse_unix_time(values[b"DIED"]),
        parse_name(values[b"IS"], "item name") if b"IS" in values else None, error_len,
        parse_unix_time(values[b"AT"]) if b"AT" in values else None, errors_len=errors_len,
        trace=parse_trace(values[b"TRACE"]) if b"TRACE" in values else None,
    ), data_len
