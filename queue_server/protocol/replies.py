"""Pure parsing of queue server replies from a byte buffer: no I/O, shared by both clients.

A parser takes `(buf, pos)` and returns `(value, end)` once the whole reply is in
`buf[pos:]`, `end` being the position after it, or None while bytes are missing.
An error status raises ErrorReply, which carries the public error and the end of
the reply, so the buffer stays in step with the stream.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, TypeVar

from queue_server.protocol.client_errors import AuthError, BadReply, OfflineError, QueueServerError

T = TypeVar("T")
Buffer = bytes | bytearray
Parsed = tuple[T, int] | None
Parser = Callable[[Buffer, int], tuple[T, int] | None]

# The server's line limit plus CRLF: a longer run of bytes with no LF is not a reply.
MAX_LINE_BYTES: Final = 65536 + 2

_OK: Final = b"200 OK"
_OK_CRLF: Final = b"200 OK\r\n"
_OK_LF: Final = b"200 OK\n"


@dataclass(frozen=True, slots=True)
class Job:
    """A job handed out by GET (or to a PUT ... WAIT caller); `id` is its running id."""

    queue: str
    id: int
    priority: int
    data: bytes
    item: str | None = None
    key: str | None = None  # the job's stable key (GET ... KEYS), kept across hand-outs
    attempt: int | None = None  # this hand-out's number, 1 on the first run (GET ... KEYS)

    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


@dataclass(frozen=True, slots=True)
class DoneResult:
    """One id's answer to DONE: FINQ is `queue_finished`, FINI is `item_finished`."""

    found: bool
    queue_finished: bool = False
    item_finished: bool = False


@dataclass(frozen=True, slots=True)
class Total:
    """TOTAL: queues holding a job, (queue, priority) classes waiting, waiting jobs, running jobs."""

    queues: int
    priorities: int
    jobs: int
    running: int


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue's entry of STATS; counters run since the server started."""

    queue: str
    ready: int
    delayed: int
    running: int
    put: int
    done: int
    later: int
    expired: int
    by_priority: dict[int, int]
    oldest_ready_age_s: float | None
    # Issue 9 (PROTOCOL.md Part B); 0 from a server that does not report them.
    failed: int = 0  # waiting for a retry (also counted in delayed)
    dead: int = 0
    failed_total: int = 0  # counters since the server started
    dead_total: int = 0
    dead_dropped: int = 0
    retried: int = 0
    deleted: int = 0
    ttl_expired: int = 0  # PUT ... TTL jobs deleted, not handed out in time


@dataclass(frozen=True, slots=True)
class RunningJob:
    """One RUNLIST entry; `length` and `data` only with RUNLIST DATA, `expires_at` is a unix time."""

    id: int
    queue: str
    priority: int
    length: int | None = None
    expires_at: float | None = None
    data: bytes | None = None


class ErrorReply(Exception):
    """Raised by a parser on an error status: the error to raise and where the reply ends."""

    def __init__(self, error: QueueServerError, end: int) -> None:
        super().__init__(str(error))
        self.error = error
        self.end = end


def error_for(line: bytes) -> QueueServerError:
    """The exception for an error status line such as `500 Offline Mode` or `401 Unauthorized`."""
    code_bytes, _, text_bytes = line.partition(b" ")
    if len(code_bytes) != 3 or not code_bytes.isdigit():
        return BadReply(f"not a status line: {line[:200]!r}")
    code = int(code_bytes)
    text = text_bytes.decode("utf-8", "replace")
    if code == 401:
        return AuthError(code, text)
    if code == 500 and text == "Offline Mode":
        return OfflineError(code, text)
    return QueueServerError(code, text)


def take_line(buf: Buffer, pos: int) -> tuple[bytes, int] | None:
    """The line at `pos` without its CRLF (or bare LF), and the position after it."""
    newline = buf.find(b"\n", pos)
    if newline < 0:
        if len(buf) - pos > MAX_LINE_BYTES:
            raise BadReply(f"no line end in {len(buf) - pos} bytes")
        return None
    end = newline - 1 if newline > pos and buf[newline - 1] == 13 else newline
    return bytes(buf[pos:end]), newline + 1


def _fail(line: bytes, end: int) -> ErrorReply:
    return ErrorReply(error_for(line), end)


def _refusal(reply: ErrorReply) -> QueueServerError:
    """The error of a status the server refused with; an unreadable status line stays raised."""
    if isinstance(reply.error, BadReply):
        raise reply
    return reply.error


def _ok_text(line: bytes) -> bytes | None:
    """The text after `200 OK` (b"" for a bare `200 OK`), or None for any other line."""
    if line == _OK:
        return b""
    if line.startswith(b"200 OK "):
        return line[7:]
    return None


def _take_ok(buf: Buffer, pos: int) -> tuple[bytes, bytes, int] | None:
    """The `200 OK` line at `pos`: (line, text after `200 OK`, end); another status raises."""
    got = take_line(buf, pos)
    if got is None:
        return None
    line, end = got
    rest = _ok_text(line)
    if rest is None:
        raise _fail(line, end)
    return line, rest, end


def _take_block(buf: Buffer, pos: int, length: int) -> tuple[bytes, int] | None:
    """The `length` data bytes at `pos` and the position after them; None while incomplete."""
    end = pos + length
    if len(buf) < end:
        return None
    return bytes(buf[pos:end]), end


def parse_ok(buf: Buffer, pos: int) -> Parsed[str]:
    """Any one-line 2xx reply (`200 OK`, `200 PONG`, `221 Goodbye`); the value is the text."""
    got = take_line(buf, pos)
    if got is None:
        return None
    line, end = got
    if line[:1] != b"2":
        raise _fail(line, end)
    return line[4:].decode("utf-8", "replace"), end


def parse_put(buf: Buffer, pos: int) -> Parsed[str | None]:
    """`200 OK` -> None; `200 OK IS <item>` (PUT ... NEW) -> the item name."""
    if buf.startswith(_OK_CRLF, pos):
        return None, pos + len(_OK_CRLF)
    got = _take_ok(buf, pos)
    if got is None:
        return None
    line, rest, end = got
    if not rest:
        return None, end
    if rest.startswith(b"IS "):
        return rest[3:].decode("ascii"), end
    raise BadReply(f"unexpected reply to PUT: {line!r}")


def parse_put_outcome(buf: Buffer, pos: int) -> Parsed[QueueServerError | None]:
    """A PUT reply as a value: None when stored, the error when refused (put_many reads on).

    An unreadable status line still raises: the stream is out of step.
    """
    try:
        got = parse_put(buf, pos)
    except ErrorReply as reply:
        return _refusal(reply), reply.end
    return None if got is None else (None, got[1])


def parse_wait_ack(buf: Buffer, pos: int) -> Parsed[str | None]:
    """`206 Wait for output[ IS <item>]`, the first reply to PUT ... WAIT; the value is the item."""
    got = take_line(buf, pos)
    if got is None:
        return None
    line, end = got
    if line == b"206 Wait for output":
        return None, end
    if line.startswith(b"206 Wait for output IS "):
        return line[23:].decode("ascii"), end
    if line[:1] == b"2":
        raise BadReply(f"unexpected reply to PUT ... WAIT: {line!r}")
    raise _fail(line, end)


def _job_block(header: bytes, buf: Buffer, end: int) -> tuple[Job, int] | None:
    """A job from `<q> <id> <prio> <len>[ IS <item>][ KEY <key> ATTEMPT <n>]` and its data
    block starting at `end`."""
    parts = header.split(b" ")
    size = len(parts)
    key = attempt = None
    if size >= 8 and parts[-4] == b"KEY" and parts[-2] == b"ATTEMPT":  # GET ... KEYS
        key = parts[-3].decode("ascii")
        attempt = int(parts[-1])
        size -= 4
    if size == 4:
        item = None
    elif size == 6 and parts[4] == b"IS":
        item = parts[5].decode("ascii")
    else:
        raise BadReply(f"bad job header: {header[:200]!r}")
    data_end = end + int(parts[3])  # inline, not _take_block: once per job handed out
    if len(buf) < data_end:
        return None
    job = Job(parts[0].decode("ascii"), int(parts[1]), int(parts[2]), bytes(buf[end:data_end]), item,
              key, attempt)
    return job, data_end


def _job_batch(count: int, buf: Buffer, pos: int) -> Parsed[list[Job]]:
    jobs: list[Job] = []
    for _ in range(count):
        got = take_line(buf, pos)
        if got is None:
            return None
        header, end = got
        block = _job_block(header, buf, end)
        if block is None:
            return None
        job, pos = block
        jobs.append(job)
    return jobs, pos


def parse_get(buf: Buffer, pos: int) -> Parsed[list[Job]]:
    """GET/GETB/GETBE, with or without COUNT: the jobs handed out; [] on `404 Queue Empty`."""
    got = take_line(buf, pos)
    if got is None:
        return None
    line, end = got
    rest = _ok_text(line)
    if rest:
        if rest.endswith(b" JOBS"):
            return _job_batch(int(rest[:-5]), buf, end)
        block = _job_block(rest, buf, end)
        if block is None:
            return None
        job, data_end = block
        return [job], data_end
    if line == b"404 Queue Empty":
        return [], end
    if rest is not None:
        raise BadReply(f"unexpected reply to GET: {line!r}")
    raise _fail(line, end)


def parse_job(buf: Buffer, pos: int) -> Parsed[Job]:
    """Exactly one job (the output job delivered to a PUT ... WAIT caller)."""
    got = parse_get(buf, pos)
    if got is None:
        return None
    jobs, end = got
    if len(jobs) != 1:
        raise BadReply(f"expected one job, got {len(jobs)}")
    return jobs[0], end


_NOT_FOUND: Final = DoneResult(found=False)
_DONE_RESULTS: Final = {
    b"": DoneResult(True, False, False),
    b"FINQ": DoneResult(True, True, False),
    b"FINI": DoneResult(True, False, True),
    b"FINQ FINI": DoneResult(True, True, True),
}


def _per_id_lines(
    count: int, decode: Callable[[bytes], T | None], buf: Buffer, pos: int
) -> Parsed[list[T]]:
    """`count` reply lines, one per id (200 or 404). An error status (400, 401, 500 Offline
    Mode) refuses the whole request and is the only line of the reply.
    """
    values: list[T] = []
    for index in range(count):
        got = take_line(buf, pos)
        if got is None:
            return None
        line, pos = got
        value = decode(line)
        if value is None:
            if index:
                raise BadReply(f"error status after {index} per-id replies: {line!r}")
            raise _fail(line, pos)
        values.append(value)
    return values, pos


def _done_line(line: bytes) -> DoneResult | None:
    rest = _ok_text(line)
    if rest is not None:
        result = _DONE_RESULTS.get(rest)
        if result is None:
            raise BadReply(f"unexpected reply to DONE: {line!r}")
        return result
    return _NOT_FOUND if line == b"404 Job Not Found" else None


def _later_line(line: bytes) -> bool | None:
    if line == _OK:
        return True
    return False if line == b"404 Job Not Found" else None


def done_parser(count: int) -> Parser[list[DoneResult]]:
    """The parser of the reply to `DONE <id> ...` naming `count` ids."""

    def parse_done(buf: Buffer, pos: int) -> Parsed[list[DoneResult]]:
        return _per_id_lines(count, _done_line, buf, pos)

    return parse_done


def later_parser(count: int) -> Parser[list[bool]]:
    """The parser of the reply to `LATER <id> ...` naming `count` ids: found or not, per id."""

    def parse_later(buf: Buffer, pos: int) -> Parsed[list[bool]]:
        return _per_id_lines(count, _later_line, buf, pos)

    return parse_later


def _ok_fields(
    buf: Buffer, pos: int, what: str, *, count: int, of: str
) -> tuple[list[bytes], int] | None:
    """The `count` fields of `200 OK <field> ...`; `of` says what they are, for the error."""
    got = _take_ok(buf, pos)
    if got is None:
        return None
    line, rest, end = got
    if not rest:
        raise BadReply(f"unexpected reply to {what}: {line!r}")
    fields = rest.split(b" ")
    if len(fields) != count:
        raise BadReply(f"{what} wants {of}, got {fields!r}")
    return fields, end


def parse_total(buf: Buffer, pos: int) -> Parsed[Total]:
    """`200 OK <queues> <priorities> <jobs> <running>`."""
    got = _ok_fields(buf, pos, "TOTAL", count=4, of="4 numbers")
    if got is None:
        return None
    fields, end = got
    queues, priorities, jobs, running = map(int, fields)
    return Total(queues, priorities, jobs, running), end


def parse_interconnect(buf: Buffer, pos: int) -> Parsed[int]:
    """`200 OK <server id>`."""
    got = _ok_fields(buf, pos, "INTERCONNECT", count=1, of="one id")
    if got is None:
        return None
    fields, end = got
    return int(fields[0]), end


def parse_server_id(buf: Buffer, pos: int) -> Parsed[int | None]:
    """The reply to INTERCONNECT: the server's id, None on an error status (it has none)."""
    try:
        return parse_interconnect(buf, pos)
    except ErrorReply as reply:
        _refusal(reply)
        return None, reply.end


def _sized_block(buf: Buffer, pos: int, what: str) -> tuple[bytes, int] | None:
    """`200 OK <len>` CRLF `<data>`: the data block."""
    got = _ok_fields(buf, pos, what, count=1, of="one length")
    if got is None:
        return None
    fields, end = got
    return _take_block(buf, end, int(fields[0]))


_KEYED_STATS = ("failed", "dead", "failed_total", "dead_total", "dead_dropped", "retried", "deleted",
                "ttl_expired")


def queue_stats(queue: str, entry: dict[str, Any]) -> QueueStats:
    """One STATS entry; keys the client does not know are ignored."""
    age = entry.get("oldest_ready_age_s")
    return QueueStats(
        queue=queue,
        ready=int(entry["ready"]),
        delayed=int(entry["delayed"]),
        running=int(entry["running"]),
        put=int(entry["put"]),
        done=int(entry["done"]),
        later=int(entry["later"]),
        expired=int(entry["expired"]),
        by_priority={int(p): int(n) for p, n in entry.get("by_priority", {}).items()},
        oldest_ready_age_s=None if age is None else float(age),
        **{name: int(entry.get(name, 0)) for name in _KEYED_STATS},
    )


def parse_stats(buf: Buffer, pos: int) -> Parsed[dict[str, QueueStats]]:
    """`200 OK <len>` CRLF `<json>`: queue name -> QueueStats."""
    got = _sized_block(buf, pos, "STATS")
    if got is None:
        return None
    data, end = got
    document = json.loads(data)
    if not isinstance(document, dict):
        raise BadReply(f"STATS JSON is not an object: {data[:200]!r}")
    try:
        return {queue: queue_stats(queue, entry) for queue, entry in document.items()}, end
    except (KeyError, TypeError, AttributeError) as exc:
        raise BadReply(f"STATS entry lacks or mistypes {exc}") from exc


def parse_snapshot(buf: Buffer, pos: int) -> Parsed[bytes]:
    """`200 OK <len>` CRLF `<data>` (SNAPSHOT)."""
    return _sized_block(buf, pos, "SNAPSHOT")


def _running_line(line: bytes, *, with_length: bool) -> RunningJob:
    parts = line.split(b" ")
    length: int | None = None
    expires_at: float | None = None
    if with_length:
        length = int(parts[3])
        rest = parts[4:]
    else:
        rest = parts[3:]
    if rest:
        if len(rest) != 2 or rest[0] != b"EXPIRE":
            raise BadReply(f"bad RUNLIST line: {line[:200]!r}")
        expires_at = float(rest[1])
    return RunningJob(int(parts[0]), parts[1].decode("ascii"), int(parts[2]), length, expires_at)


def runlist_parser(*, with_data: bool) -> Parser[list[RunningJob]]:
    """The parser of the reply to RUNLIST (or RUNLIST DATA when `with_data`)."""

    def parse_runlist(buf: Buffer, pos: int) -> Parsed[list[RunningJob]]:
        got = _ok_fields(buf, pos, "RUNLIST", count=1, of="one count")
        if got is None:
            return None
        fields, pos = got
        jobs: list[RunningJob] = []
        for _ in range(int(fields[0])):
            line = take_line(buf, pos)
            if line is None:
                return None
            text, pos = line
            jobs.append(_running_line(text, with_length=with_data))
        if not with_data:
            return jobs, pos
        with_blocks: list[RunningJob] = []
        for job in jobs:
            block = _take_block(buf, pos, job.length or 0)
            if block is None:
                return None
            data, pos = block
            with_blocks.append(
                RunningJob(job.id, job.queue, job.priority, job.length, job.expires_at, data)
            )
        return with_blocks, pos

    return parse_runlist


class NeedMore(Enum):
    """Returned by ReplyBuffer.take while the reply is not complete yet."""

    BYTES = "bytes"


NEED_MORE: Final = NeedMore.BYTES


class ReplyBuffer:
    """Bytes received and not parsed yet; both clients feed it and take whole replies from it."""

    __slots__ = ("_buf", "_pos")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def take(self, parse: Parser[T]) -> T | NeedMore:
        """The next reply, NEED_MORE while incomplete. An error reply is skipped, then raised."""
        try:
            got = parse(self._buf, self._pos)
        except ErrorReply as reply:
            self._pos = reply.end
            raise reply.error from None
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise BadReply(f"unreadable reply: {exc}") from exc
        if got is None:
            return NEED_MORE
        value, self._pos = got
        return value

    @property
    def pending(self) -> int:
        """Bytes received and not yet consumed by a parser."""
        return len(self._buf) - self._pos

    def clear(self) -> None:
        self._buf.clear()
        self._pos = 0
