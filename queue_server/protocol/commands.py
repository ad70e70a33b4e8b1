"""Pure parsing of request lines (PROTOCOL.md) into command objects; no I/O, no clock."""
from __future__ import annotations

from collections.abc import Callable

from queue_server.protocol import cancels
from queue_server.protocol import finished as fin
from queue_server.protocol import jobs as pj
from queue_server.protocol.command_types import (
    Auth,
    Authority,
    Clone,
    Command,
    Done,
    Get,
    GetMode,
    Later,
    Link,
    Parsed,
    Put,
    ReplAck,
    Simple,
)
from queue_server.protocol.errors import UNKNOWN_COMMAND, ProtocolError, bad_request
from queue_server.protocol.fields import keyword_values, parse_name, parse_queue_list, parse_then
from queue_server.protocol.framing import MAX_LINE_BYTES
from queue_server.protocol.keyed import Key
from queue_server.protocol.numbers import (
    INT64_MAX,
    INT64_MIN,
    parse_bounded,
    parse_count,
    parse_id,
    parse_ids,
    parse_length,
    parse_port,
    parse_priority,
    parse_seconds,
    parse_uint,
)
from queue_server.protocol.sync_parse import parse_sync, with_block

# The command types are re-exported: callers read `commands.Get` beside `commands.parse_line`.
__all__ = [
    "INT64_MAX", "INT64_MIN", "MAX_LINE_BYTES", "parse_line",
    "GetMode",
    "Get",
    "Put",
    "Done",
    "Later",
    "Simple",
    "Link",
    "ReplAck",
    "Authority",
    "Clone",
    "Auth",
    "Command",
    "Parsed",
]

_KEYWORDS = frozenset((b"EXPIRE", b"THEN", b"COUNT", b"KEYS"))
KEYS_FLAG = b"KEYS"
# Not a first-argument keyword: a plain `GET TRACES` is still the queue named TRACES.
TRACES_FLAG = b"TRACES"


# ---------------------------------------------------------------- commands


def _parse_get(mode: GetMode, args: list[bytes]) -> Get:
    queues: tuple[str, ...] | None = None
    if args and args[0] not in _KEYWORDS:
        queues = parse_queue_list(args[0])
        args = args[1:]
    if not args:  # `GET q`, the hot case: no options to look for
        return Get(mode, queues, None, None, None, False, False)
    keys = KEYS_FLAG in args
    if keys:
        if args.count(KEYS_FLAG) > 1:
            raise bad_request("KEYS given twice")
        args = [arg for arg in args if arg != KEYS_FLAG]
    traces = TRACES_FLAG in args
    if traces:
        if args.count(TRACES_FLAG) > 1:
            raise bad_request("TRACES given twice")
        if not keys:
            raise bad_request("TRACES needs KEYS")
        args = [arg for arg in args if arg != TRACES_FLAG]
    values = keyword_values(args, _KEYWORDS)
    expire_s = parse_seconds(values[b"EXPIRE"], "EXPIRE") if b"EXPIRE" in values else None
    then_done = None
    if b"THEN" in values:
        if expire_s is None:
            raise bad_request("THEN without EXPIRE")
        then_done = parse_then(values[b"THEN"])
    count = parse_count(values[b"COUNT"]) if b"COUNT" in values else None
    return Get(mode, queues, expire_s, then_done, count, keys, traces)


_PUT_KEYWORDS = frozenset((b"IS", b"NEW", b"WAIT", b"EXPIRE", b"THEN", b"DELAY", b"KEY", b"TTL",
                           b"TRACE"))


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
    ttl_s: float | None = None
    job_key: Key | None = None
    trace: bytes | None = None
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
        elif key == b"KEY":
            if value != b"*":
                if value[:1] == b"_":
                    raise bad_request("a producer's key may not start with _")
                job_key = pj.parse_job_key(value)
        elif key == b"TTL":
            ttl_s = parse_seconds(value, "TTL")
        elif key == b"TRACE":
            trace = pj.parse_trace(value)
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
    return Put(queue, priority, item, new_item, wait_queue, expire_s, then_done, delay_s, job_key,
               b"KEY" in seen, ttl_s, trace)


def _parse_put(args: list[bytes]) -> Parsed:
    if len(args) < 3:
        raise bad_request("PUT <q> <p> <len> expected")
    data_len = parse_length(args[2])
    try:
        return Parsed(_parse_put_options(args), data_len)
    except ProtocolError as error:
        return Parsed(None, data_len, error)


def _parse_later(args: list[bytes]) -> Later:
    front = args[-1:] == [b"FRONT"]
    if front:
        args = args[:-1]
    solo = False
    if args and args[-1] == b"SOLO":
        solo = True
        args = args[:-1]
    delay_s = None
    if len(args) >= 2 and args[-2] == b"DELAY":
        delay_s = parse_seconds(args[-1], "DELAY")
        args = args[:-2]
    if front and delay_s is not None:
        raise bad_request("LATER ... FRONT takes no DELAY")
    return Later(parse_ids(args), delay_s, solo, front)


def _parse_optional_queue(name: bytes, args: list[bytes]) -> Simple:
    if len(args) > 1:
        raise bad_request("at most one queue name")
    return Simple(name, parse_name(args[0]) if args else None)


STATS_MAX_NAMES = 1000  # queues one `STATS q1|q2|...` may name
STATS_MAX_TOP = 1000  # the largest n of `STATS TOP <n>`


def _parse_stats(args: list[bytes]) -> Simple:
    """`STATS`, `STATS q` (Part A); `STATS q1|q2|...`, `STATS TOP <n>` (Part B). A queue
    named TOP stays `STATS TOP`: the opt-in forms are lines a plain client never sends."""
    if len(args) == 2 and args[0] == b"TOP":
        return Simple(b"STATS", top=parse_bounded(args[1], "TOP", 1, STATS_MAX_TOP))
    if len(args) == 2 and args[0] == b"LATENCY":
        names = args[1].split(b"|")
        if len(names) > STATS_MAX_NAMES:
            raise bad_request(f"at most {STATS_MAX_NAMES} queue names")
        return Simple(b"STATS", queues=tuple(dict.fromkeys(parse_name(name) for name in names)), latency=True)
    if len(args) == 1 and b"|" in args[0]:
        names = args[0].split(b"|")
        if len(names) > STATS_MAX_NAMES:
            raise bad_request(f"at most {STATS_MAX_NAMES} queue names")
        return Simple(b"STATS", queues=tuple(dict.fromkeys(parse_name(name) for name in names)))
    return _parse_optional_queue(b"STATS", args)


def _parse_no_args(name: bytes, args: list[bytes]) -> Simple:
    if args:
        raise bad_request(f"{name.decode()} takes no arguments")
    return Simple(name)


def _parse_peer(args: list[bytes]) -> tuple[int, str, int] | None:
    if not args:
        return None
    if len(args) != 3:
        raise bad_request("<n> <ip> <port> expected")
    return parse_id(args[0]), args[1].decode("ascii", "replace"), parse_port(args[2])


def _parse_fail(args: list[bytes]) -> Parsed:
    command, data_len, error = pj.parse_fail(args)
    return Parsed(command, data_len, error)


def _parse_runlist(name: bytes, args: list[bytes]) -> Parsed:
    if args and args != [b"DATA"]:
        raise bad_request("RUNLIST takes only DATA")
    return Parsed(Simple(name, flag=bool(args)))


def _parse_clone(args: list[bytes]) -> Parsed:
    if len(args) != 1:
        raise bad_request("CLONE <len> expected")
    return Parsed(Clone(), parse_length(args[0]))


def _parse_repl_ack(args: list[bytes]) -> Parsed:
    if len(args) not in (1, 2):
        raise bad_request("REPLACK <bytes> [<records>] expected")
    records = parse_uint(args[1], "record count") if len(args) == 2 else None
    return Parsed(ReplAck(parse_uint(args[0], "byte count"), records))


def _parse_lease(args: list[bytes]) -> Parsed:
    if len(args) not in (3, 4) or args[3:] not in ([], [b"ALONE"]):
        raise bad_request("LEASE <epoch> <ms> <echo> [ALONE] expected")
    return Parsed(Authority(b"LEASE", parse_uint(args[0], "epoch"), parse_uint(args[1], "lease"),
                            parse_uint(args[2], "echo"), alone=len(args) == 4))


def _parse_promote(args: list[bytes]) -> Parsed:
    if len(args) != 1:
        raise bad_request("PROMOTE <epoch> expected")
    return Parsed(Authority(b"PROMOTE", parse_uint(args[0], "epoch")))


def _parse_follow(args: list[bytes]) -> Parsed:
    if len(args) != 2:
        raise bad_request("FOLLOW <host:port> <epoch> expected")
    host, _, port = args[0].rpartition(b":")
    if not host:
        raise bad_request("bad address")
    return Parsed(Authority(b"FOLLOW", parse_uint(args[1], "epoch"),
                            primary=(host.decode("ascii", "replace"), parse_port(port))))


def _parse_auth(args: list[bytes]) -> Parsed:
    if len(args) != 1:
        raise bad_request("AUTH <token> expected")
    return Parsed(Auth(args[0]))


def _no_args(name: bytes) -> Callable[[list[bytes]], Parsed]:
    return lambda args: Parsed(_parse_no_args(name, args))


def _optional_queue(name: bytes) -> Callable[[list[bytes]], Parsed]:
    return lambda args: Parsed(_parse_optional_queue(name, args))


def _link(name: bytes) -> Callable[[list[bytes]], Parsed]:
    return lambda args: Parsed(Link(name, _parse_peer(args)))


# The command word -> its parser: one table, the hot commands first (dict order is only
# for the reader; lookups are O(1)).
_PARSERS: dict[bytes, Callable[[list[bytes]], Parsed]] = {
    b"PUT": _parse_put,
    b"GET": lambda args: Parsed(_parse_get(GetMode.NOW, args)),
    b"DONE": lambda args: _parse_done(args),
    b"GETB": lambda args: Parsed(_parse_get(GetMode.BLOCK, args)),
    b"LATER": lambda args: Parsed(_parse_later(args)),
    b"GETBE": lambda args: Parsed(_parse_get(GetMode.UNTIL_IDLE, args)),
    b"SYNC": parse_sync,
    b"FAIL": _parse_fail,
    b"TOUCH": lambda args: Parsed(pj.parse_touch(args)),
    b"JOB": lambda args: Parsed(pj.parse_job(args)),
    b"JOBS": lambda args: Parsed(pj.parse_jobs(args)),
    b"RETRY": lambda args: Parsed(pj.parse_retry(args)),
    b"DELETE": lambda args: Parsed(pj.parse_delete(args)),
    b"CANCEL": lambda args: Parsed(pj.parse_cancel(args)),
    b"CANCELLED": lambda args: Parsed(cancels.parse_cancelled(args)),
    b"CLIENT": lambda args: Parsed(pj.parse_client(args)),
    b"RESULT": lambda args: Parsed(fin.parse_result(args)),
    b"TOTAL": _optional_queue(b"TOTAL"),
    b"STATS": lambda args: Parsed(_parse_stats(args)),
    b"RUNLIST": lambda args: _parse_runlist(b"RUNLIST", args),
    **{name: _no_args(name) for name in (b"OFFLINE", b"ONLINE", b"QUIT", b"SHUTDOWN", b"PING", b"INFO", b"ROLE", b"REPLICAS")},
    b"SNAPSHOT": _link(b"SNAPSHOT"),
    b"INTERCONNECT": _link(b"INTERCONNECT"),
    b"CLONE": _parse_clone,
    b"AUTH": _parse_auth,
    b"REPLACK": _parse_repl_ack,
    b"LEASE": _parse_lease,
    b"PROMOTE": _parse_promote,
    b"FOLLOW": _parse_follow,
}


def _parse_done(args: list[bytes]) -> Parsed:
    if len(args) == 3 and args[1] in (b"RESULT", b"LARGE"):  # DONE <id> RESULT <len> (Part B)
        return with_block(fin.parse_done, args)
    return Parsed(Done(parse_ids(args)))


def parse_line(line: bytes) -> Parsed:
    """Parse one request line (without its terminator). Raises ProtocolError."""
    args = line.split()
    name = args[0]
    if name == b"GET":  # the two hot ones without the table's extra call
        return Parsed(_parse_get(GetMode.NOW, args[1:]))
    if name == b"DONE":
        if len(args) == 4:  # one test for a plain DONE, as before the LARGE form
            if args[2] == b"RESULT":  # DONE <id> RESULT <len> (Part B)
                data_len = parse_length(args[3])
                try:
                    return with_block(fin.parse_done, args[1:])
                except ProtocolError as error:  # a bad id: the result is still read past (fine point 1)
                    return Parsed(None, data_len, error)
            if args[2] == b"LARGE":  # DONE <id> LARGE <n>: no block (Part B)
                return with_block(fin.parse_done, args[1:])
        return Parsed(Done(parse_ids(args[1:])))
    parse = _PARSERS.get(name)
    if parse is None:
        raise UNKNOWN_COMMAND
    return parse(args[1:])


def data_length_of(line: bytes) -> int:
    """The data block length a line announces, or -1 (used to skip data when refusing)."""
    try:
        return parse_line(line).data_len
    except ProtocolError:
        return -1
