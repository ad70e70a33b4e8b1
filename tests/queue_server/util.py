"""Helpers for the raw-socket protocol tests: polling, and parsing replies from PROTOCOL.md."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from polling import poll_until as poll_until

T = TypeVar("T")

JOB_LINE = re.compile(rb"200 OK ([A-Za-z0-9_]+) ([0-9]+) (-?[0-9]+) ([0-9]+)(?: IS ([A-Za-z0-9_]+))?")
BATCH_JOB_LINE = re.compile(rb"([A-Za-z0-9_]+) ([0-9]+) (-?[0-9]+) ([0-9]+)(?: IS ([A-Za-z0-9_]+))?")
RUNLIST_LINE = re.compile(
    rb"([0-9]+) ([A-Za-z0-9_]+) (-?[0-9]+)(?: ([0-9]+))?(?: EXPIRE ([0-9]+(?:\.[0-9]+)?))?"
)
BAD_REQUEST = re.compile(rb"400 Bad Request: \S.*")
NEW_ITEM = re.compile(rb"_[0-9]+")


class Conn(Protocol):
    def send(self, data: bytes) -> None: ...
    def line(self) -> bytes: ...
    def exact(self, n: int) -> bytes: ...
    def expect(self, data: bytes) -> None: ...
    def request(self, line: bytes) -> bytes: ...
    def pending(self, wait_s: float = ...) -> bytes: ...


@dataclass(frozen=True)
class Job:
    queue: str
    id: int
    priority: int
    data: bytes
    item: str | None = None


@dataclass(frozen=True)
class Running:
    id: int
    queue: str
    priority: int
    length: int | None
    expire_at: float | None


def put(conn: Conn, queue: str, priority: int, data: bytes, extra: str = "") -> bytes:
    """PUT and return the reply line (not checked)."""
    suffix = f" {extra}" if extra else ""
    conn.send(f"PUT {queue} {priority} {len(data)}{suffix}\r\n".encode() + data)
    return conn.line()


def put_ok(conn: Conn, queue: str, priority: int, data: bytes, extra: str = "") -> None:
    reply = put(conn, queue, priority, data, extra)
    assert reply == b"200 OK", f"PUT {queue} {priority} {extra!r}: {reply!r}"


def put_new(conn: Conn, queue: str, priority: int, data: bytes, extra: str = "") -> str:
    """PUT ... NEW; returns the item name the server made."""
    reply = put(conn, queue, priority, data, f"NEW {extra}".strip())
    assert reply.startswith(b"200 OK IS "), reply
    item = reply[len(b"200 OK IS "):]
    assert NEW_ITEM.fullmatch(item), f"NEW item name must be _<digits>: {reply!r}"
    return item.decode()


def read_job(conn: Conn) -> Job | None:
    """Read a GET-style reply: a job (line and data) or None for `404 Queue Empty`."""
    line = conn.line()
    if line == b"404 Queue Empty":
        return None
    match = JOB_LINE.fullmatch(line)
    assert match, f"not a job reply: {line!r}"
    data = conn.exact(int(match[4]))
    item = match[5].decode() if match[5] else None
    return Job(match[1].decode(), int(match[2]), int(match[3]), data, item)


def get(conn: Conn, request: str = "GET") -> Job | None:
    conn.send(request.encode() + b"\r\n")
    return read_job(conn)


def get_job(conn: Conn, request: str = "GET") -> Job:
    job = get(conn, request)
    assert job is not None, f"{request}: 404 Queue Empty, a job was expected"
    return job


def read_batch(conn: Conn) -> list[Job]:
    """Read a `200 OK <k> JOBS` batch reply; [] for `404 Queue Empty`."""
    line = conn.line()
    if line == b"404 Queue Empty":
        return []
    match = re.fullmatch(rb"200 OK ([0-9]+) JOBS", line)
    assert match, f"not a batch reply: {line!r}"
    jobs = []
    for _ in range(int(match[1])):
        header = conn.line()
        job_match = BATCH_JOB_LINE.fullmatch(header)
        assert job_match, f"not a batch job header: {header!r}"
        data = conn.exact(int(job_match[4]))
        item = job_match[5].decode() if job_match[5] else None
        jobs.append(Job(job_match[1].decode(), int(job_match[2]), int(job_match[3]), data, item))
    return jobs


def total(conn: Conn, queue: str | None = None) -> tuple[int, int, int, int]:
    reply = conn.request(b"TOTAL" if queue is None else f"TOTAL {queue}".encode())
    match = re.fullmatch(rb"200 OK ([0-9]+) ([0-9]+) ([0-9]+) ([0-9]+)", reply)
    assert match, f"bad TOTAL reply: {reply!r}"
    return int(match[1]), int(match[2]), int(match[3]), int(match[4])


def runlist(conn: Conn, *, data: bool = False) -> list[tuple[Running, bytes | None]]:
    conn.send(b"RUNLIST DATA\r\n" if data else b"RUNLIST\r\n")
    head = conn.line()
    match = re.fullmatch(rb"200 OK ([0-9]+)", head)
    assert match, f"bad RUNLIST reply: {head!r}"
    entries = []
    for _ in range(int(match[1])):
        line = conn.line()
        entry = RUNLIST_LINE.fullmatch(line)
        assert entry, f"bad RUNLIST line: {line!r}"
        length = int(entry[4]) if entry[4] is not None else None
        assert (length is not None) == data, f"<len> must appear exactly with DATA: {line!r}"
        expire_at = float(entry[5]) if entry[5] is not None else None
        entries.append(Running(int(entry[1]), entry[2].decode(), int(entry[3]), length, expire_at))
    blocks: list[bytes | None] = [conn.exact(e.length or 0) if data else None for e in entries]
    return list(zip(entries, blocks, strict=True))


def running_ids(conn: Conn) -> set[int]:
    return {entry.id for entry, _ in runlist(conn)}


def stats(conn: Conn, queue: str | None = None) -> dict[str, Any]:
    conn.send(b"STATS\r\n" if queue is None else f"STATS {queue}\r\n".encode())
    head = conn.line()
    match = re.fullmatch(rb"200 OK ([0-9]+)", head)
    assert match, f"bad STATS reply: {head!r}"
    body = conn.exact(int(match[1]))
    parsed = json.loads(body)
    assert isinstance(parsed, dict), body
    return parsed


def barrier(conn: Conn) -> None:
    """One round trip: the server has handled everything other clients sent before this."""
    conn.send(b"PING\r\n")
    conn.expect(b"200 PONG\r\n")


def assert_bad_request(reply: bytes) -> None:
    assert BAD_REQUEST.fullmatch(reply), f"expected '400 Bad Request: <why>', got {reply!r}"


def drain(conn: Conn, queue: str) -> list[Job]:
    """GET every ready job of `queue`, in hand-out order."""
    jobs = []
    while (job := get(conn, f"GET {queue}")) is not None:
        jobs.append(job)
    return jobs
