"""Pure request encoding for the queue clients: validated arguments to request bytes.

Names are checked here because a space or CRLF inside one would split the stream
into other requests; a bad argument raises ValueError before anything is sent.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Final, Literal

from config.endpoints import parse_host_port
from queue_server.protocol.numbers import COUNT_MAX, ID_MAX, INT64_MAX, INT64_MIN, MAX_SECONDS

Then = Literal["done", "later"]
Block = Literal[False, True, "until_empty"]
Address = tuple[str, int]

DEFAULT_SERVER: Final = "127.0.0.1:7400"
CRLF: Final = b"\r\n"
PRIORITY_MIN: Final = INT64_MIN
PRIORITY_MAX: Final = INT64_MAX

_NAME_RE: Final = re.compile(r"[A-Za-z0-9_]{1,128}\Z", re.ASCII)
KEY_PATTERN: Final = r"[A-Za-z0-9_.:@-]{1,128}"
_KEY_RE: Final = re.compile(KEY_PATTERN + r"\Z", re.ASCII)
_NAME_CACHE_LIMIT: Final = 4096
_names: dict[str, bytes] = {}

_THEN: Final[dict[str, bytes]] = {"done": b" THEN DONE", "later": b" THEN LATER"}
_GET_VERBS: Final[dict[object, bytes]] = {False: b"GET", True: b"GETB", "until_empty": b"GETBE"}

PING: Final = b"PING\r\n"
INTERCONNECT: Final = b"INTERCONNECT\r\n"
ROLE: Final = b"ROLE\r\n"


def name(value: str, *, what: str = "queue") -> bytes:
    """A queue or item name as bytes; ValueError unless 1..128 of [A-Za-z0-9_]."""
    encoded = _names.get(value)
    if encoded is not None:
        return encoded
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValueError(f"{what} name must be 1..128 characters of [A-Za-z0-9_], got {value!r}")
    if len(_names) >= _NAME_CACHE_LIMIT:
        _names.clear()
    encoded = _names[value] = value.encode("ascii")
    return encoded


def key(value: str, *, producer: bool = False) -> bytes:
    """A job key as bytes; ValueError unless 1..128 of [A-Za-z0-9_.:@-]. A producer's
    own key may not start with `_` (the server's keys do)."""
    if not isinstance(value, str) or not _KEY_RE.match(value):
        raise ValueError(f"job key must be 1..128 characters of [A-Za-z0-9_.:@-], got {value!r}")
    if producer and value[0] == "_":
        raise ValueError(f"a producer's job key may not start with '_' (server keys do), got {value!r}")
    return value.encode("ascii")


def seconds(value: float, *, what: str) -> bytes:
    """A non-negative, finite number of seconds, written without an exponent."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{what} must be finite and 0..{MAX_SECONDS} seconds, got {value!r}")
    if isinstance(value, int) or value.is_integer():
        return b"%d" % int(value)
    return (b"%.6f" % value).rstrip(b"0").rstrip(b".")


def priority(value: int) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"priority must be an integer, got {value!r}")
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise ValueError(f"priority must fit a signed 64-bit integer, got {value}")
    return b"%d" % value


def job_id(value: int) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= ID_MAX:
        raise ValueError(f"job id must be a positive integer up to {ID_MAX}, got {value!r}")
    return b"%d" % value


def payload(data: bytes | str) -> bytes:
    """Job data as bytes: str is encoded as UTF-8."""
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"job data must be bytes or str, got {type(data).__name__}")


def _expire(expire_s: float | None, then: Then | None) -> bytes:
    if expire_s is None:
        if then is not None:
            raise ValueError("then= needs expire_s: THEN only follows EXPIRE")
        return b""
    suffix = b""
    if then is not None:
        if then not in _THEN:
            raise ValueError(f"then must be 'done' or 'later', got {then!r}")
        suffix = _THEN[then]
    return b" EXPIRE " + seconds(expire_s, what="expire_s") + suffix


def put_request(
    queue: str,
    data: bytes | str,
    *,
    priority_: int = 0,
    item: str | None = None,
    new_item: bool = False,
    delay_s: float | None = None,
    wait_queue: str | None = None,
    expire_s: float | None = None,
    then: Then | None = None,
    keyed: bool = False,
    key_: str | None = None,
    ttl_s: float | None = None,
    trace: bytes | None = None,
) -> bytes:
    """`PUT <q> <p> <len> [IS <item>|NEW] [WAIT <oq> [EXPIRE <s> [THEN x]]] [DELAY <s>]
    [KEY <key>|KEY *] [TTL <s>] [TRACE <traceparent>]` + data. `keyed` asks for the key in
    the reply (`KEY *` unless `key_`); `trace` is a valid traceparent (client/tracing.py)."""
    body = payload(data)
    parts = [b"PUT ", name(queue), b" ", priority(priority_), b" %d" % len(body)]
    if item is not None and new_item:
        raise ValueError("give item= or new_item=True, not both")
    if item is not None:
        parts += (b" IS ", name(item, what="item"))
    elif new_item:
        parts.append(b" NEW")
    if wait_queue is not None:
        if item is None and not new_item:
            raise ValueError("WAIT needs item= or new_item=True")
        parts += (b" WAIT ", name(wait_queue, what="output queue"), _expire(expire_s, then))
    elif expire_s is not None or then is not None:
        raise ValueError("expire_s/then on PUT only apply to the awaited output job")
    if delay_s is not None:
        parts += (b" DELAY ", seconds(delay_s, what="delay_s"))
    if key_ is not None:
        parts += (b" KEY ", key(key_, producer=True))
    elif keyed:
        parts.append(b" KEY *")
    if ttl_s is not None:
        parts += (b" TTL ", seconds(ttl_s, what="ttl_s"))
    if trace is not None:
        parts += (b" TRACE ", trace)
    parts += (CRLF, body)
    return b"".join(parts)


def put_many_request(queue: str, datas: Iterable[bytes | str], *, priority_: int = 0,
                     trace: bytes | None = None) -> bytes:
    """Plain PUTs of every item of `datas`, back to back, as one byte string (each with
    `TRACE <trace>` when given)."""
    head = b"PUT " + name(queue) + b" " + priority(priority_) + b" "
    end = b"\r\n" if trace is None else b" TRACE " + trace + b"\r\n"
    parts: list[bytes] = []
    for data in datas:
        body = data if type(data) is bytes else payload(data)
        parts += (head, b"%d" % len(body), end, body)
    return b"".join(parts)


def get_request(
    queues: str | Sequence[str] | None = None,
    *,
    count: int | None = None,
    expire_s: float | None = None,
    then: Then | None = None,
    block: Block = False,
    keys: bool = False,
    traces: bool = False,
) -> bytes:
    """`GET|GETB|GETBE [q[|q...]] [COUNT <n>] [EXPIRE <s> [THEN x]] [KEYS [TRACES]]`."""
    verb = _GET_VERBS.get(block)
    if verb is None:
        raise ValueError(f"block must be False, True or 'until_empty', got {block!r}")
    parts = [verb]
    if queues is not None:
        names = [queues] if isinstance(queues, str) else list(queues)
        if not names:
            raise ValueError("queues must name at least one queue (or be None for any queue)")
        parts += (b" ", b"|".join(name(q) for q in names))
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= COUNT_MAX:
            raise ValueError(f"count must be an integer 1..{COUNT_MAX}, got {count!r}")
        parts.append(b" COUNT %d" % count)
    parts.append(_expire(expire_s, then))
    if keys:
        parts.append(b" KEYS TRACES" if traces else b" KEYS")
    elif traces:
        raise ValueError("traces=True needs keys=True")
    parts.append(CRLF)
    return b"".join(parts)


def _ids(verb: bytes, ids: Sequence[int]) -> list[bytes]:
    if not ids:
        raise ValueError(f"{verb.decode()} needs at least one job id")
    parts = [verb]
    for value in ids:
        parts += (b" ", job_id(value))
    return parts


def done_request(ids: Sequence[int]) -> bytes:
    """`DONE <id> <id> ...`."""
    parts = _ids(b"DONE", ids)
    parts.append(CRLF)
    return b"".join(parts)


def later_request(ids: Sequence[int], *, delay_s: float | None = None, solo: bool = False,
                  front: bool = False) -> bytes:
    """`LATER <id> <id> ... [DELAY <s>] [SOLO] [FRONT]`."""
    parts = _ids(b"LATER", ids)
    if delay_s is not None:
        parts += (b" DELAY ", seconds(delay_s, what="delay_s"))
    if solo:
        parts.append(b" SOLO")
    if front:
        parts.append(b" FRONT")
    parts.append(CRLF)
    return b"".join(parts)


def named_request(verb: bytes, queue: str | None) -> bytes:
    """A command with an optional queue name: `TOTAL [q]`, `STATS [q]`."""
    if queue is None:
        return verb + CRLF
    return b"".join((verb, b" ", name(queue), CRLF))


STATS_MAX_NAMES = 1000  # as the server's parser (commands.py) allows


def stats_of_request(queues: Sequence[str]) -> bytes:
    """`STATS q1|q2|...` (Part B); one name is plain `STATS q`."""
    if not 1 <= len(queues) <= STATS_MAX_NAMES:
        raise ValueError(f"STATS names 1 to {STATS_MAX_NAMES} queues, not {len(queues)}")
    if len(queues) == 1:
        return named_request(b"STATS", queues[0])
    return b"STATS " + b"|".join(name(queue) for queue in queues) + CRLF


def stats_latency_request(queues: Sequence[str]) -> bytes:
    """`STATS LATENCY q1|q2|...` (Part B): the queues' latency histograms and error types."""
    if not 1 <= len(queues) <= STATS_MAX_NAMES:
        raise ValueError(f"STATS LATENCY names 1 to {STATS_MAX_NAMES} queues, not {len(queues)}")
    return b"STATS LATENCY " + b"|".join(name(queue) for queue in queues) + CRLF


def stats_top_request(count: int) -> bytes:
    """`STATS TOP <n>` (Part B), 1 <= n <= 1000."""
    if not 1 <= count <= 1000:
        raise ValueError(f"STATS TOP takes 1 to 1000, not {count}")
    return b"STATS TOP %d\r\n" % count


def client_name_request(name: str) -> bytes:
    """`CLIENT NAME <name>`: the door the connection's RETRY and DELETE are counted under."""
    encoded = name.encode("ascii", "replace")
    if not 1 <= len(encoded) <= 64 or not all(c in _NAME_BYTES for c in encoded):
        raise ValueError(f"client name {name!r}: 1..64 of A-Z a-z 0-9 _ . : -")
    return b"CLIENT NAME " + encoded + CRLF


_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")


def auth_request(token: str) -> bytes:
    encoded = token.encode("utf-8")
    if not encoded or any(c in encoded for c in b" \r\n"):
        raise ValueError("token must be non-empty, without spaces or line breaks")
    return b"AUTH " + encoded + CRLF


def runlist_request(*, with_data: bool) -> bytes:
    return b"RUNLIST DATA\r\n" if with_data else b"RUNLIST\r\n"


def parse_servers(servers: str | Sequence[str]) -> list[Address]:
    """`"host:port"`, `"h1:p1,h2:p2"` or a sequence of `"host:port"` -> addresses, in order."""
    texts = servers.split(",") if isinstance(servers, str) else list(servers)
    addresses = [parse_host_port(text.strip()) for text in texts if text.strip()]
    if not addresses:
        raise ValueError("servers must name at least one HOST:PORT")
    return addresses


def rank_servers(server_ids: Sequence[int | None], serving: Sequence[bool | None] = ()) -> list[int]:
    """Indexes into `server_ids` (one per reachable server, in list order), primary first:
    a server whose ROLE says it does not acknowledge (a replica, a deposed or refusing
    primary: `serving` False) after the others, then lowest server id, then list order.
    None (a server that did not tell its id) ranks last among its kind.
    """
    def says_not(i: int) -> bool:
        return i < len(serving) and serving[i] is False

    return sorted(
        range(len(server_ids)),
        key=lambda i: (says_not(i), server_ids[i] is None, server_ids[i] or 0, i),
    )


def verb_of(request: bytes) -> str:
    """The command word of an encoded request, for error messages."""
    return request[:16].split(b" ", 1)[0].split(b"\r", 1)[0].decode("ascii", "replace")


def format_address(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
