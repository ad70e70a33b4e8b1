"""Pure parsing of the keyed-job replies (PROTOCOL.md Part B): PUT ... KEY, FAIL, TOUCH,
JOB, JOBS, RETRY, DELETE. Same parser shape as queue_server/protocol/replies.py."""
from __future__ import annotations

import json
from typing import Final, cast

from pydantic import ValidationError

from queue_server.protocol.client_errors import BadReply
from queue_server.protocol.job_info import ExistingState, FailResult, JobInfo, PutResult
from queue_server.protocol.replies import (
    Buffer,
    ErrorReply,
    Parsed,
    Parser,
    _fail,
    _ok_fields,
    _ok_text,
    _per_id_lines,
    _sized_block,
    _take_ok,
    later_parser,
    take_line,
)

_EXISTING: Final = frozenset(("ready", "delayed", "failed", "running"))
_JOB_NOT_FOUND: Final = b"404 Job Not Found"
_DELETE_LINES: Final = {b"200 OK": "ok", _JOB_NOT_FOUND: "not_found", b"409 Job Running": "running"}


def parse_put_keyed(buf: Buffer, pos: int) -> Parsed[PutResult]:
    """`200 OK[ IS <item>] KEY <key>[ EXISTS <state>]`."""
    got = _take_ok(buf, pos)
    if got is None:
        return None
    line, rest, end = got
    fields = rest.split(b" ")
    item = None
    if fields[:1] == [b"IS"] and len(fields) >= 2:
        item = fields[1].decode("ascii")
        fields = fields[2:]
    if len(fields) < 2 or fields[0] != b"KEY":
        raise BadReply(f"unexpected reply to PUT ... KEY: {line!r}")
    existing = None
    if len(fields) == 4 and fields[2] == b"EXISTS" and fields[3].decode("ascii") in _EXISTING:
        existing = cast(ExistingState, fields[3].decode("ascii"))
    elif len(fields) != 2:
        raise BadReply(f"unexpected reply to PUT ... KEY: {line!r}")
    return PutResult(fields[1].decode("ascii"), item, existing), end


def parse_fail(buf: Buffer, pos: int) -> Parsed[FailResult]:
    """`200 OK DEAD` or `200 OK RETRY <unix time>`."""
    got = _take_ok(buf, pos)
    if got is None:
        return None
    line, rest, end = got
    if rest == b"DEAD":
        return FailResult(dead=True), end
    if rest.startswith(b"RETRY "):
        return FailResult(dead=False, next_run_at=float(rest[6:])), end
    raise BadReply(f"unexpected reply to FAIL: {line!r}")


# TOUCH and RETRY answer per id or key as LATER does: `200 OK` or `404 Job Not Found`.
found_parser = later_parser


def delete_parser(count: int) -> Parser[list[str]]:
    """One line per key: "ok", "not_found" or "running" (`409 Job Running`)."""

    def parse_delete(buf: Buffer, pos: int) -> Parsed[list[str]]:
        return _per_id_lines(count, _DELETE_LINES.get, buf, pos)

    return parse_delete


def parse_count(buf: Buffer, pos: int) -> Parsed[int]:
    """`200 OK <n>` (RETRY ... ALL, DELETE ... ALL DEAD)."""
    got = _ok_fields(buf, pos, "RETRY/DELETE ALL", count=1, of="one count")
    if got is None:
        return None
    fields, end = got
    return int(fields[0]), end


def _job_info(entry: object) -> JobInfo:
    try:
        return JobInfo.model_validate(entry)
    except ValidationError as exc:
        raise BadReply(f"bad job JSON: {exc}") from exc


def parse_job_info(buf: Buffer, pos: int) -> Parsed[JobInfo | None]:
    """`200 OK <len>` CRLF `<json object>`; None on `404 Job Not Found`."""
    got = take_line(buf, pos)
    if got is None:
        return None
    line, end = got
    if line == _JOB_NOT_FOUND:
        return None, end
    if _ok_text(line) is None:
        raise _fail(line, end)
    block = _sized_block(buf, pos, "JOB")
    if block is None:
        return None
    data, end = block
    return _job_info(json.loads(data)), end


def parse_jobs(buf: Buffer, pos: int) -> Parsed[list[JobInfo]]:
    """`200 OK <len>` CRLF `<json array>`."""
    block = _sized_block(buf, pos, "JOBS")
    if block is None:
        return None
    data, end = block
    document = json.loads(data)
    if not isinstance(document, list):
        raise BadReply(f"JOBS JSON is not an array: {data[:200]!r}")
    return [_job_info(entry) for entry in document], end


__all__ = [
    "ErrorReply", "delete_parser", "found_parser", "parse_count", "parse_fail",
    "parse_job_info", "parse_jobs", "parse_put_keyed",
]
