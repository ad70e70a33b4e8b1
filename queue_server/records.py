"""Encoding of SYNC records: the one form shared by the log, snapshots and replication."""
from __future__ import annotations

from collections.abc import Iterable

_THEN = {True: b" THEN DONE", False: b" THEN LATER"}


def _time(value: float) -> bytes:
    return repr(value).encode("ascii")


def put(queue: str, priority: int, data: bytes, item: str | None, until: float | None) -> bytes:
    head = b"SYNC PUT %s %d %d" % (queue.encode(), priority, len(data))
    if item is not None:
        head += b" IS " + item.encode()
    if until is not None:
        head += b" UNTIL " + _time(until)
    return head + b"\r\n" + data


def get(queue: str, job_id: int, priority: int, last: bool, until: float | None, then_done: bool) -> bytes:
    line = b"SYNC GET LAST %s %d %d" if last else b"SYNC GET %s %d %d"
    record = line % (queue.encode(), job_id, priority)
    if until is not None:
        record += b" UNTIL " + _time(until) + _THEN[then_done]
    return record + b"\r\n"


def done(ids: Iterable[int]) -> bytes:
    return b"SYNC DONE " + b" ".join(b"%d" % job_id for job_id in ids) + b"\r\n"


def later(ids: Iterable[int], until: float | None) -> bytes:
    record = b"SYNC LATER " + b" ".join(b"%d" % job_id for job_id in ids)
    if until is not None:
        record += b" UNTIL " + _time(until)
    return record + b"\r\n"


def wake(until: float) -> bytes:
    return b"SYNC WAKE " + _time(until) + b"\r\n"


def ids(next_id: int, next_item: int) -> bytes:
    return b"SYNC IDS %d %d\r\n" % (next_id, next_item)
