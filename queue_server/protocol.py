"""Pure parsing of request lines (PROTOCOL.md) into command objects; no I/O, no clock."""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from queue_server.errors import UNKNOWN_COMMAND, ProtocolError, bad_request

MAX_LINE_BYTES = 65536
_NAME = re.compile(rb"[A-Za-z0-9_]{1,128}")
_INT = re.compile(rb"-?[0-9]+")
_UINT = re.compile(rb"[0-9]+")
_SECONDS = re.compile(rb"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_KEYWORDS = frozenset((b"EXPIRE", b"THEN", b"COUNT"))
NEW_KEYWORD = b"NEW"


class GetMode(IntEnum):
    NOW = 0  # GET
    BLOCK = 1  # GETB
    UNTIL_IDLE = 2  # GETBE


@dataclass(slots=True)
class Get:
    mode: GetMode
    queues: tuple[str, ...] | None
    expire_s: float | None
    then_done: bool | None
    count: int | None


@dataclass(slots=True)
class Put:
    queue: str
    priority: int
    item: str | None
    new_item: bool
    wait_queue: str | None
    expire_s: float | None
    then_done: bool | None
    delay_s: float | None
    data: bytes = b""


@dataclass(slots=True)
class Done:
    ids: tuple[int, ...]


@dataclass(slots=True)
class Later:
    ids: tuple[int, ...]
    delay_s: float | None


@dataclass(slots=True)
class Simple:
    """A command without arguments beyond an optional queue name (TOTAL, STATS, ...)."""

    name: bytes
    queue: str | None = None
    flag: bool = False


@dataclass(slots=True)
class Link:
    """SNAPSHOT / INTERCONNECT, with an optional replication peer."""

    name: bytes
    peer: tuple[int, str, int] | None


@dataclass(slots=True)
class Clone:
    data: bytes = b""


@dataclass(slots=True)
class Auth:
    token: bytes


# SYNC commands: the replication and log form (times are absolute unix seconds).
@dataclass(slots=True)
class SyncPut:
    queue: str
    priority: int
    item: str | None
    until: float | None
    delay_s: float | None = None  # relative, from a primary that sent DELAY
    new_item: bool = False
    data: bytes = b""


@dataclass(slots=True)
class SyncGet:
    queue: str
    job_id: int
    priority: int
    last: bool
    until: float | None
    then_done: bool | None


@dataclass(slots=True)
class SyncDone:
    ids: tuple[int, ...]


@dataclass(slots=True)
class SyncLater:
    ids: tuple[int, ...]
    until: float | None


@dataclass(slots=True)
class SyncWake:
    until: float


@dataclass(slots=True)
class SyncIds:
    next_id: int
    next_item: int


Command = (
    Get | Put | Done | Later | Simple | Link | Clone | Auth
    | SyncPut | SyncGet | SyncDone | SyncLater | SyncWake | SyncIds
)


@dataclass(slots=True)
class Parsed:
    """A parsed line. `data_len` >= 0: that many data bytes follow and belong to it.

    `error` is set when the request is bad but its data block must still be consumed
    (PROTOCOL.md fine point 1); then `command` is None.
    """

    command: Command | None
    data_len: int = -1
    error: ProtocolError | None = None


# ---------------------------------------------------------------- field parsers


def parse_name(raw: bytes, what: str = "queue name") -> str:
    if _NAME.fullmatch(raw) is None:
        raise bad_request(f"bad {what}")
    return raw.decode("ascii")


def parse_priority(raw: bytes) -> int:
    if _INT.fullmatch(raw) is None:
        raise bad_request("bad priority")
    value = int(raw)
    if not INT64_MIN <= value <= INT64_MAX:
        raise bad_request("priority out of 64-bit range")
    return value


def parse_length(raw: bytes) -> int:
    if _UINT.fullmatch(raw) is None:
        raise bad_request("bad length")
    return int(raw)


def parse_seconds(raw: bytes, what: str) -> float:
    if _SECONDS.fullmatch(raw) is None:
        raise bad_request(f"bad {what} seconds")
    return float(raw)


def parse_unix_time(raw: bytes) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise bad_request("bad unix time") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise bad_request("bad unix time")
    return value


def parse_id(raw: bytes) -> int:
    if _UINT.fullmatch(raw) is None:
        raise bad_request("bad job id")
    return int(raw)


def parse_ids(raws: list[bytes]) -> tuple[int, ...]:
    if not raws:
        raise bad_request("job id expected")
    return tuple(parse_id(raw) for raw in raws)


def parse_then(raw: bytes) -> bool:
    if raw == b"DONE":
        return True
    if raw == b"LATER":
        return False
    raise bad_request("THEN must be DONE or LATER")


def parse_queue_list(raw: bytes) -> tuple[str, ...]:
    names = raw.split(b"|")
    return tuple(parse_name(name) for name in names)


def _keyword_values(args: list[bytes], allowed: frozenset[bytes]) -> dict[bytes, bytes]:
    """Pairs `KEY value` in any order; each key at most once."""
    if len(args) % 2:
        raise bad_request(f"{args[-1].decode('ascii', 'replace')} needs a value")
    found: dict[bytes, bytes] = {}
    for index in range(0, len(args), 2):
        key = args[index]
        if key not in allowed:
            raise bad_request(f"unexpected {key.decode('ascii', 'replace')}")
        if key in found:
            raise bad_request(f"{key.decode('ascii', 'replace')} given twice")
        found[key] = args[index + 1]
    return found


# ---------------------------------------------------------------- commands


def _parse_get(mode: GetMode, args: list[bytes]) -> Get:
    queues: tuple[str, ...] | None = None
    if args and args[0] not in _KEYWORDS:
        queues = parse_queue_list(args[0])
        args = args[1:]
    values = _keyword_values(args, _KEYWORDS)
    expire_s = parse_seconds(values[b"EXPIRE"], "EXPIRE") if b"EXPIRE" in values else None
    then_done = None
    if b"THEN" in values:
        if expire_s is None:
            raise bad_request("THEN without EXPIRE")
        then_done = parse_then(values[b"THEN"])
    count = None
    if b"COUNT" in values:
        raw = values[b"COUNT"]
        if _UINT.fullmatch(raw) is None or int(raw) < 1:
            raise bad_request("COUNT must be an integer >= 1")
        count = int(raw)
    return Get(mode, queues, expire_s, then_done, count)


_PUT_KEYWORDS = frozenset((b"IS", b"NEW", b"WAIT", b"EXPIRE", b"THEN", b"DELAY"))


def _parse_put_options(args: list[bytes]) -> Put:
    """`<q> <p> <len> [options]` with options in any order (Part B)."""
    queue = parse_name(args[0])
    priority = parse_priority(args[1])
    item: str | None = None
    new_item = False
    wait_queue: str | None = None
    expire_s: float | None = None
    then_done: bool | None = None
    delay_s: float | None = None
    seen: set[bytes] = set()
    index = 3
    while index < len(args):
        key = args[index]
        if key not in _PUT_KEYWORDS:
            raise bad_request(f"unexpected {key.decode('ascii', 'replace')}")
        if key in seen:
            raise bad_request(f"{key.decode('ascii', 'replace')} given twice")
        seen.add(key)
        if key == b"NEW":
            new_item = True
            index += 1
            continue
        if index + 1 >= len(args):
            raise bad_request(f"{key.decode('ascii')} needs a value")
        value = args[index + 1]
        index += 2
        if key == b"IS":
            item = parse_name(value, "item name")
        elif key == b"WAIT":
            wait_queue = parse_name(value, "output queue name")
        elif key == b"EXPIRE":
            expire_s = parse_seconds(value, "EXPIRE")
        elif key == b"THEN":
            then_done = parse_then(value)
        else:
            delay_s = parse_seconds(value, "DELAY")
    if item is not None and new_item:
        raise bad_request("IS and NEW together")
    if wait_queue is not None and item is None and not new_item:
        raise bad_request("WAIT needs IS or NEW")
    if (expire_s is not None or then_done is not None) and wait_queue is None:
        raise bad_request("EXPIRE in PUT needs WAIT")
    if then_done is not None and expire_s is None:
        raise bad_request("THEN without EXPIRE")
    return Put(queue, priority, item, new_item, wait_queue, expire_s, then_done, delay_s)


def _parse_put(args: list[bytes]) -> Parsed:
    if len(args) < 3:
        raise bad_request("PUT <q> <p> <len> expected")
    data_len = parse_length(args[2])
    try:
        return Parsed(_parse_put_options(args), data_len)
    except ProtocolError as error:
        return Parsed(None, data_len, error)


def _parse_later(args: list[bytes]) -> Later:
    delay_s = None
    if len(args) >= 2 and args[-2] == b"DELAY":
        delay_s = parse_seconds(args[-1], "DELAY")
        args = args[:-2]
    return Later(parse_ids(args), delay_s)


def _parse_optional_queue(name: bytes, args: list[bytes]) -> Simple:
    if len(args) > 1:
        raise bad_request("at most one queue name")
    return Simple(name, parse_name(args[0]) if args else None)


def _parse_no_args(name: bytes, args: list[bytes]) -> Simple:
    if args:
        raise bad_request(f"{name.decode()} takes no arguments")
    return Simple(name)


def _parse_peer(args: list[bytes]) -> tuple[int, str, int] | None:
    if not args:
        return None
    if len(args) != 3:
        raise bad_request("<n> <ip> <port> expected")
    server_id = parse_id(args[0])
    if _UINT.fullmatch(args[2]) is None or not 0 < int(args[2]) < 65536:
        raise bad_request("bad port")
    return server_id, args[1].decode("ascii", "replace"), int(args[2])


def _parse_sync(args: list[bytes]) -> Parsed:
    if not args:
        raise bad_request("SYNC needs a command")
    verb, rest = args[0], args[1:]
    if verb == b"PUT":
        if len(rest) < 3:
            raise bad_request("SYNC PUT <q> <p> <len> expected")
        data_len = parse_length(rest[2])
        try:
            return Parsed(_parse_sync_put(rest), data_len)
        except ProtocolError as error:
            return Parsed(None, data_len, error)
    if verb == b"GET":
        return Parsed(_parse_sync_get(rest))
    if verb == b"DONE":
        return Parsed(SyncDone(parse_ids(rest)))
    if verb == b"LATER":
        until = None
        if len(rest) >= 2 and rest[-2] == b"UNTIL":
            until = parse_unix_time(rest[-1])
            rest = rest[:-2]
        return Parsed(SyncLater(parse_ids(rest), until))
    if verb == b"WAKE" and len(rest) == 1:
        return Parsed(SyncWake(parse_unix_time(rest[0])))
    if verb == b"IDS" and len(rest) == 2:
        return Parsed(SyncIds(parse_id(rest[0]), parse_id(rest[1])))
    raise bad_request("unknown SYNC command")


def _parse_sync_put(rest: list[bytes]) -> SyncPut:
    """As PUT (IS / NEW / DELAY), plus UNTIL <unix time>; a replica never waits (no WAIT)."""
    new_item = NEW_KEYWORD in rest[3:]
    options = [arg for arg in rest[3:] if arg != NEW_KEYWORD]
    if new_item and len(options) != len(rest) - 4:
        raise bad_request("NEW given twice")
    values = _keyword_values(options, frozenset((b"IS", b"UNTIL", b"DELAY")))
    item = parse_name(values[b"IS"], "item name") if b"IS" in values else None
    if item is not None and new_item:
        raise bad_request("IS and NEW together")
    until = parse_unix_time(values[b"UNTIL"]) if b"UNTIL" in values else None
    delay_s = parse_seconds(values[b"DELAY"], "DELAY") if b"DELAY" in values else None
    return SyncPut(parse_name(rest[0]), parse_priority(rest[1]), item, until, delay_s, new_item)


def _parse_sync_get(rest: list[bytes]) -> SyncGet:
    last = bool(rest) and rest[0] == b"LAST"
    if last:
        rest = rest[1:]
    if len(rest) < 3:
        raise bad_request("SYNC GET [LAST] <q> <id> <p> expected")
    values = _keyword_values(rest[3:], frozenset((b"UNTIL", b"THEN")))
    until = parse_unix_time(values[b"UNTIL"]) if b"UNTIL" in values else None
    then_done = parse_then(values[b"THEN"]) if b"THEN" in values else None
    return SyncGet(parse_name(rest[0]), parse_id(rest[1]), parse_priority(rest[2]), last, until, then_done)


def parse_line(line: bytes) -> Parsed:
    """Parse one request line (without its terminator). Raises ProtocolError."""
    args = line.split()
    name = args[0]
    args = args[1:]
    if name == b"PUT":
        return _parse_put(args)
    if name == b"GET":
        return Parsed(_parse_get(GetMode.NOW, args))
    if name == b"DONE":
        return Parsed(Done(parse_ids(args)))
    if name == b"GETB":
        return Parsed(_parse_get(GetMode.BLOCK, args))
    if name == b"LATER":
        return Parsed(_parse_later(args))
    if name == b"GETBE":
        return Parsed(_parse_get(GetMode.UNTIL_IDLE, args))
    if name == b"SYNC":
        return _parse_sync(args)
    if name in (b"TOTAL", b"STATS"):
        return Parsed(_parse_optional_queue(name, args))
    if name == b"RUNLIST":
        if args and args != [b"DATA"]:
            raise bad_request("RUNLIST takes only DATA")
        return Parsed(Simple(name, flag=bool(args)))
    if name in (b"OFFLINE", b"ONLINE", b"QUIT", b"SHUTDOWN", b"PING"):
        return Parsed(_parse_no_args(name, args))
    if name in (b"SNAPSHOT", b"INTERCONNECT"):
        return Parsed(Link(name, _parse_peer(args)))
    if name == b"CLONE":
        if len(args) != 1:
            raise bad_request("CLONE <len> expected")
        return Parsed(Clone(), parse_length(args[0]))
    if name == b"AUTH":
        if len(args) != 1:
            raise bad_request("AUTH <token> expected")
        return Parsed(Auth(args[0]))
    raise UNKNOWN_COMMAND


def data_length_of(line: bytes) -> int:
    """The data block length a line announces, or -1 (used to skip data when refusing)."""
    try:
        return parse_line(line).data_len
    except ProtocolError:
        return -1
