"""JOBS search (PROTOCOL.md Part B, issue 26): the opt-in filters of a JOBS listing, on the
wire both ways, and its reply. Pure: no I/O.

`JOBS <q> <state> [LIMIT <n>] [AFTER <key> [AT <position>]] [PREFIX <p>] [ERROR <type>] [SINCE <unix>]
[UNTIL <unix>] [SCAN <n>]`. Any of the last five asks for a search: the server examines at
most SCAN jobs of the listing (after AFTER) and answers an object with the jobs that
matched and where it stopped, so one request on a queue of millions cannot hold the
single-threaded server for long. Without them JOBS is exactly what it was.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Final

from queue_server.protocol.errors import bad_request
from queue_server.protocol.job_info import JobInfo
from queue_server.protocol.numbers import parse_bounded, parse_unix_time

SCAN_DEFAULT: Final = 10_000
SCAN_MAX: Final = 100_000
# An error type as latency.py names it: a Python traceback's last `Name:` (dotted), or other.
ERROR_TYPE_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,99}")
_PREFIX_RE: Final = re.compile(rb"[A-Za-z0-9_.:@-]{1,128}")
SEARCH_WORDS: Final = frozenset((b"PREFIX", b"ERROR", b"SINCE", b"UNTIL", b"SCAN"))
# The time SINCE/UNTIL look at, per state (JOB JSON field); ready jobs have none.
TIME_FIELD: Final = {"dead": "died_at", "done": "done_at", "failed": "failed_at",
                     "delayed": "next_run_at", "running": "started_at"}


@dataclass(frozen=True, slots=True)
class JobsSearch:
    """What a JOBS search keeps: key prefix, last error's type, a time range, the scan bound."""

    prefix: str | None = None
    error_type: str | None = None
    since: float | None = None  # unix time, inclusive
    until: float | None = None  # unix time, exclusive
    scan: int = SCAN_DEFAULT


@dataclass(frozen=True, slots=True)
class JobsPage:
    """A JOBS search's reply: the matches, how many jobs were examined, and `after`: the key
    to pass as AFTER to go on (None: the listing ended), with `position`, its place to pass
    as AT (None from a server older than positions: AFTER alone, job_positions.py)."""

    jobs: list[JobInfo]
    after: str | None
    scanned: int
    position: str | None = None


def parse_search_word(search: JobsSearch, word: bytes, value: bytes) -> JobsSearch | None:
    """`search` with one more word set, or None when `word` is not a search word."""
    if word == b"PREFIX":
        if _PREFIX_RE.fullmatch(value) is None:
            raise bad_request("PREFIX must be 1..128 of [A-Za-z0-9_.:@-]")
        return _with(search, prefix=value.decode("ascii"))
    if word == b"ERROR":
        text = value.decode("ascii", "replace")
        if ERROR_TYPE_RE.fullmatch(text) is None:
            raise bad_request("ERROR must be an error type such as ValueError or requests.Timeout")
        return _with(search, error_type=text)
    if word == b"SINCE":
        return _with(search, since=parse_unix_time(value))
    if word == b"UNTIL":
        return _with(search, until=parse_unix_time(value))
    if word == b"SCAN":
        return _with(search, scan=parse_bounded(value, "SCAN", 1, SCAN_MAX))
    return None


def check_search(state: str, search: JobsSearch) -> None:
    if state not in TIME_FIELD and (search.since is not None or search.until is not None):
        raise bad_request("ready jobs have no time to search by (SINCE/UNTIL)")


def _with(search: JobsSearch, **changes: object) -> JobsSearch:
    fields = {name: getattr(search, name) for name in JobsSearch.__dataclass_fields__}
    fields.update(changes)
    return JobsSearch(**fields)  # type: ignore[arg-type]


def search_words(search: JobsSearch) -> list[bytes]:
    """The request's search words (the client side); ValueError on a bad value."""
    parts: list[bytes] = []
    if search.prefix is not None:
        if _PREFIX_RE.fullmatch(search.prefix.encode("ascii", "replace")) is None:
            raise ValueError(f"prefix must be 1..128 of [A-Za-z0-9_.:@-], got {search.prefix!r}")
        parts += (b" PREFIX ", search.prefix.encode("ascii"))
    if search.error_type is not None:
        if ERROR_TYPE_RE.fullmatch(search.error_type) is None:
            raise ValueError(f"error_type must be an error type name, got {search.error_type!r}")
        parts += (b" ERROR ", search.error_type.encode("ascii"))
    for word, value in ((b" SINCE ", search.since), (b" UNTIL ", search.until)):
        if value is not None:
            if not 0 <= value <= 10**11:
                raise ValueError(f"times must be unix times, got {value!r}")
            parts += (word, (b"%.6f" % value).rstrip(b"0").rstrip(b"."))
    if not 1 <= search.scan <= SCAN_MAX:
        raise ValueError(f"scan must be 1..{SCAN_MAX}, got {search.scan!r}")
    parts += (b" SCAN %d" % search.scan,)
    return parts


def page_json(jobs: list[dict[str, object]], after: str | None, scanned: int,
              position: str | None = None) -> dict[str, object]:
    return {"jobs": jobs, "after": after, "scanned": scanned, "position": position}


def parse_page(data: bytes) -> JobsPage:
    """The reply's JSON object as a JobsPage; ValueError when it is not one."""
    document = json.loads(data)
    if not isinstance(document, dict) or not isinstance(document.get("jobs"), list):
        raise ValueError(f"JOBS search reply is not an object with jobs: {data[:200]!r}")
    after = document.get("after")
    position = document.get("position")
    return JobsPage(jobs=[JobInfo.model_validate(entry) for entry in document["jobs"]],
                    after=after if isinstance(after, str) else None,
                    scanned=int(document.get("scanned") or 0),
                    position=position if isinstance(position, str) and after is not None else None)
