"""Every number on a request line or SYNC record, with its bounds, in one place.

The door (a client's request), the log replay, snapshot loading (CLONE, recovery) and
replication all parse through these functions (commands.py's parse_line), so whatever
the door acknowledged is accepted again by the replay, and no number can become a
float inf or nan or a Python int too long to convert. Each parser looks at the length
of the digits before converting (Python's int() refuses over 4,300 digits with a
ValueError, and float() turns 400 digits into inf), and an out-of-range value gets
`400 Bad Request: <field> must be ...` naming the bound.

The bounds:
- seconds (DELAY, TTL, EXPIRE): 0..MAX_SECONDS, at most MAX_NUMBER_CHARS characters;
- unix times (SYNC records: UNTIL, AT, DIED, WAKE, TOUCH, TTL): 0..MAX_UNIX_TIME, which
  is above every now + MAX_SECONDS of the next thousands of years, so any deadline the
  door made is a time the replay accepts;
- priorities: signed 64-bit;
- job ids: 0..ID_MAX (18 digits: no comparison after the match, DONE is hot);
- lengths: MAX_LENGTH_DIGITS digits (a longer one is over every block limit: 413);
- counters (SYNC IDS): 0..ID_MAX + 1; attempts, COUNT: up to INT64_MAX.
A counter reaches its bound only after about 10**18 hand-outs (or when a replication
peer, which holds the token, sends a value next to it). The durations the server adds to
now itself (lock times, retry delays) are bounded by MAX_SECONDS in config/models.py.
"""
from __future__ import annotations

import re
from typing import Final

from config.bounded import MAX_SECONDS
from queue_server.protocol.errors import bad_request

__all__ = ["MAX_SECONDS"]  # the bound config/ keeps; re-exported for the parsers

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
MAX_UNIX_TIME: Final = 10**11  # the year 5138
MAX_NUMBER_CHARS: Final = 32  # a seconds value or a unix time, as written
ID_DIGITS: Final = 18
ID_MAX: Final = 10**ID_DIGITS - 1
MAX_LENGTH_DIGITS: Final = 20  # any length of more digits is over every block limit
LENGTH_OVER_ANY_LIMIT: Final = 2**64  # what such a length parses to (413, the stream dropped)
COUNT_MAX: Final = INT64_MAX
PORT_MAX: Final = 65535
# A name `_<n>` (server item names and keys) stands for the counter value n only up to this
# many digits, so a producer's `_999...9` cannot push a counter past ID_MAX (PUT ... NEW
# would then make a name the replay refuses).
COUNTER_NAME_DIGITS: Final = ID_DIGITS

_DIGITS: Final = re.compile(rb"[0-9]+")
_SIGNED: Final = re.compile(rb"-?[0-9]+")
_PRIORITY: Final = re.compile(rb"-?[0-9]{1,19}")
_ID: Final = re.compile(rb"[0-9]{1,%d}" % ID_DIGITS)
_LENGTH: Final = re.compile(rb"[0-9]{1,%d}" % MAX_LENGTH_DIGITS)
_INT64: Final = re.compile(rb"[0-9]{1,19}")
_SECONDS: Final = re.compile(rb"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
# repr() of a float, as records.py writes times (an exponent for tiny or huge values).
_UNIX_TIME: Final = re.compile(rb"[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?")


def parse_priority(raw: bytes) -> int:
    if _PRIORITY.fullmatch(raw) is None:
        if _SIGNED.fullmatch(raw) is not None:
            raise bad_request("priority out of 64-bit range")
        raise bad_request("bad priority")
    value = int(raw)
    if not INT64_MIN <= value <= INT64_MAX:
        raise bad_request("priority out of 64-bit range")
    return value


def parse_id(raw: bytes) -> int:
    """A job id or server id: 0..ID_MAX (0 is never given out: 404)."""
    if _ID.fullmatch(raw) is None:
        if _DIGITS.fullmatch(raw) is not None:
            raise bad_request(f"job id must be at most {ID_MAX}")
        raise bad_request("bad job id")
    return int(raw)


def parse_ids(raws: list[bytes]) -> tuple[int, ...]:
    if len(raws) == 1:  # a DONE of one job, the hot case: no generator expression
        return (parse_id(raws[0]),)
    if not raws:
        raise bad_request("job id expected")
    if all(map(_ID.fullmatch, raws)):  # a slot's DONE of a batch: checked and converted in C
        return tuple(map(int, raws))
    return tuple(parse_id(raw) for raw in raws)  # the first bad one's error


def parse_length(raw: bytes) -> int:
    """A block length. One of more than MAX_LENGTH_DIGITS digits is over every limit: it
    parses to LENGTH_OVER_ANY_LIMIT, so the caller answers `413 Job Too Large` and drops
    the stream as for any block too large (the client meant to send that much)."""
    if _LENGTH.fullmatch(raw) is None:
        if _DIGITS.fullmatch(raw) is not None:
            return LENGTH_OVER_ANY_LIMIT
        raise bad_request("bad length")
    return int(raw)


def parse_bounded(raw: bytes, what: str, low: int, high: int) -> int:
    """An integer low..high (both >= 0); 400 naming the bounds otherwise."""
    if _INT64.fullmatch(raw) is None:
        if _DIGITS.fullmatch(raw) is not None:
            raise bad_request(f"{what} must be {low}..{high}")
        raise bad_request(f"bad {what}")
    value = int(raw)
    if not low <= value <= high:
        raise bad_request(f"{what} must be {low}..{high}")
    return value


def parse_uint(raw: bytes, what: str) -> int:
    """A counter or count: 0..INT64_MAX."""
    return parse_bounded(raw, what, 0, INT64_MAX)


def parse_counter(raw: bytes) -> int:
    """SYNC IDS: the next id, item number or key number, one past the largest given out."""
    return parse_bounded(raw, "counter", 0, ID_MAX + 1)


def parse_count(raw: bytes) -> int:
    return parse_bounded(raw, "COUNT", 1, COUNT_MAX)


def parse_port(raw: bytes) -> int:
    return parse_bounded(raw, "port", 1, PORT_MAX)


def parse_seconds(raw: bytes, what: str) -> float:
    """A duration: 0..MAX_SECONDS, fractions allowed, no exponent, never inf or nan."""
    if _SECONDS.fullmatch(raw) is None:
        raise bad_request(f"bad {what} seconds")
    if len(raw) > MAX_NUMBER_CHARS:
        raise bad_request(f"{what} must be 0..{MAX_SECONDS} seconds, in at most {MAX_NUMBER_CHARS} characters")
    value = float(raw)
    if value > MAX_SECONDS:
        raise bad_request(f"{what} must be 0..{MAX_SECONDS} seconds")
    return value


def parse_unix_time(raw: bytes) -> float:
    """An absolute time in a SYNC record: 0..MAX_UNIX_TIME, as records.py writes it."""
    if _UNIX_TIME.fullmatch(raw) is None:
        raise bad_request("bad unix time")
    if len(raw) > MAX_NUMBER_CHARS:
        raise bad_request(f"unix time must be 0..{MAX_UNIX_TIME}, in at most {MAX_NUMBER_CHARS} characters")
    value = float(raw)
    if value > MAX_UNIX_TIME:
        raise bad_request(f"unix time must be 0..{MAX_UNIX_TIME}")
    return value


def counter_of_name(name: str) -> int | None:
    """n for a name `_<n>` that may stand for a counter value (server items, keys), else None."""
    digits = name[1:]
    if name[:1] == "_" and digits.isdigit() and digits[:1] != "0" and len(digits) <= COUNTER_NAME_DIGITS:
        return int(digits)
    return None
