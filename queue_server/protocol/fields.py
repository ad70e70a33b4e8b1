"""Pure parsers of request fields (names, numbers, times, ids); raise ProtocolError (400)."""
from __future__ import annotations

import re

from queue_server.protocol.errors import bad_request

_NAME = re.compile(rb"[A-Za-z0-9_]{1,128}")
_INT = re.compile(rb"-?[0-9]+")
_UINT = re.compile(rb"[0-9]+")
NEW_KEYWORD = b"NEW"  # PUT ... NEW and SYNC PUT ... NEW: the server names the item
_SECONDS = re.compile(rb"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1



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


def parse_uint(raw: bytes, what: str) -> int:
    if _UINT.fullmatch(raw) is None:
        raise bad_request(f"bad {what}")
    return int(raw)


def keyword_values(args: list[bytes], allowed: frozenset[bytes]) -> dict[bytes, bytes]:
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
