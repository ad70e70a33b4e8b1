"""Pure parsing of the keyed-job replies (PROTOCOL.md Part B): PUT ... KEY, FAIL, TOUCH,
JOB, JOBS, RETRY, DELETE. Same parser shape as queue_server/protocol/reply_parsers.py."""
from __future__ import annotations

import json
from typing import Final, cast

from pydantic import ValidationError

from queue_server.protocol.client_errors import BadReply
from queue_server.protocol.framing import FrameReader
from queue_server.protocol.job_info import ExistingState, FailResult, JobInfo, PutResult
from queue_server.protocol.job_search import JobsPage, parse_page
from queue_server.protocol.reply_parsers import later_parser
from queue_server.protocol.reply_reading import (
    JOB_NOT_FOUND,
    Parser,
    error_for,
    need_line,
    need_ok,
    ok_fields,
    ok_text,
    per_id_lines,
    sized_block,
)

_EXISTING: Final = frozenset(("ready", "delayed", "failed", "running"))
_DELETE_LINES: Final = {b"200 OK": "ok", JOB_NOT_FOUND: "not_found", b"409 Job Running": "running"}


def parse_put_keyed(reader: FrameReader) -> PutResult:
    """`200 OK[ IS <item>] KEY <key>[ EXISTS <state>[ QUEUE <queue>]]`."""
    line, rest = need_ok(reader)
    fields = rest.split(b" ")
    item = None
    if fields[:1] == [b"IS"] and len(fields) >= 2:
        item = fields[1].decode("ascii")
        fields = fields[2:]
    if len(fields) < 2 or fields[0] != b"KEY":
        raise BadReply(f"unexpected reply to PUT ... KEY: {line!r}")
    existing = elsewhere = None
    if len(fields) in (4, 6) and fields[2] == b"EXISTS" and fields[3].decode("ascii") in _EXISTING:
        existing = cast(ExistingState, fields[3].decode("ascii"))
        if len(fields) == 6:
            if fields[4] != b"QUEUE":
                raise BadReply(f"unexpected reply to PUT ... KEY: {line!r}")
            elsewhere = fields[5].decode("ascii")
    elif len(fields) != 2:
        raise BadReply(f"unexpected reply to PUT ... KEY: {line!r}")
    return PutResult(fields[1].decode("ascii"), item, existing, elsewhere)


def parse_fail(reader: FrameReader) -> FailResult:
    """`200 OK DEAD` or `200 OK RETRY <unix time>`."""
    line, rest = need_ok(reader)
    if rest == b"DEAD":
        return FailResult(dead=True)
    if rest.startswith(b"RETRY "):
        return FailResult(dead=False, next_run_at=float(rest[6:]))
    raise BadReply(f"unexpected reply to FAIL: {line!r}")


# TOUCH and RETRY answer per id or key as LATER does: `200 OK` or `404 Job Not Found`.
found_parser = later_parser


def delete_parser(count: int) -> Parser[list[str]]:
    """One line per key: "ok", "not_found" or "running" (`409 Job Running`)."""

    def parse_delete(reader: FrameReader) -> list[str]:
        return per_id_lines(reader, count, _DELETE_LINES.get)

    return parse_delete


_CANCEL_LINES: Final = {b"200 OK removed": "removed", b"200 OK cancelled": "cancelled", JOB_NOT_FOUND: "not_found"}


def parse_cancel(reader: FrameReader) -> str:
    """CANCEL: "removed" (was waiting), "cancelled" (was running, now dead) or "not_found"."""
    return per_id_lines(reader, 1, _CANCEL_LINES.get)[0]


def parse_count(reader: FrameReader) -> int:
    """`200 OK <n>` (RETRY ... ALL, DELETE ... ALL DEAD)."""
    [count] = ok_fields(reader, "RETRY/DELETE ALL", count=1, of="one count")
    return int(count)


def _job_info(entry: object) -> JobInfo:
    try:
        return JobInfo.model_validate(entry)
    except ValidationError as exc:
        raise BadReply(f"bad job JSON: {exc}") from exc


def parse_job_info(reader: FrameReader) -> JobInfo | None:
    """`200 OK <len>` CRLF `<json object>`; None on `404 Job Not Found`."""
    start = reader.position
    line = need_line(reader)
    if line == JOB_NOT_FOUND:
        return None
    if ok_text(line) is None:
        raise error_for(line)
    reader.position = start  # the `200 OK <len>` line again, as sized_block reads it
    return _job_info(json.loads(sized_block(reader, "JOB")))


def parse_jobs(reader: FrameReader) -> list[JobInfo]:
    """`200 OK <len>` CRLF `<json array>`."""
    data = sized_block(reader, "JOBS")
    document = json.loads(data)
    if not isinstance(document, list):
        raise BadReply(f"JOBS JSON is not an array: {data[:200]!r}")
    return [_job_info(entry) for entry in document]


def parse_jobs_page(reader: FrameReader) -> JobsPage:
    """A JOBS search's `200 OK <len>` CRLF `<json object>`."""
    data = sized_block(reader, "JOBS")
    try:
        return parse_page(data)
    except ValueError as exc:
        raise BadReply(str(exc)) from None


__all__ = [
    "delete_parser", "found_parser", "parse_cancel", "parse_count", "parse_fail",
    "parse_job_info", "parse_jobs", "parse_jobs_page", "parse_put_keyed",
]
