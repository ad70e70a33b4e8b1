"""Pure parsing of the replies to the queue commands (PUT, GET, DONE, LATER, TOTAL, STATS,
RUNLIST, INTERCONNECT, PUT ... WAIT): no I/O, shared by both clients.

Each parser reads one whole reply from a FrameReader (reply_reading.py: incomplete replies,
error statuses); the keyed-job commands' parsers are in job_replies.py.
"""
from __future__ import annotations

import json
from typing import Any, Final

from queue_server.protocol.client_errors import BadReply, QueueServerError
from queue_server.protocol.framing import FrameReader
from queue_server.protocol.replies import (
    DoneResult,
    Job,
    QueueStats,
    RunningJob,
    Total,
    queue_stats,
)
from queue_server.protocol.reply_reading import (
    JOB_NOT_FOUND,
    OK,
    Parser,
    error_for,
    need_block,
    need_line,
    need_ok,
    ok_fields,
    ok_text,
    per_id_lines,
    refusal,
    sized_block,
)


def parse_ok(reader: FrameReader) -> str:
    """Any one-line 2xx reply (`200 OK`, `200 PONG`, `221 Goodbye`); the value is the text."""
    line = need_line(reader)
    if line[:1] != b"2":
        raise error_for(line)
    return line[4:].decode("utf-8", "replace")


def parse_put(reader: FrameReader) -> str | None:
    """`200 OK` -> None; `200 OK IS <item>` (PUT ... NEW) -> the item name."""
    line, rest = need_ok(reader)
    if not rest:
        return None
    if rest.startswith(b"IS "):
        return rest[3:].decode("ascii")
    raise BadReply(f"unexpected reply to PUT: {line!r}")


def parse_put_outcome(reader: FrameReader) -> QueueServerError | None:
    """A PUT reply as a value: None when stored, the error when refused (put_many reads on).

    An unreadable status line still raises: the stream is out of step.
    """
    try:
        parse_put(reader)
    except QueueServerError as error:
        return refusal(error)
    return None


def parse_wait_ack(reader: FrameReader) -> str | None:
    """`206 Wait for output[ IS <item>]`, the first reply to PUT ... WAIT; the value is the item."""
    return parse_wait_ack_keyed(reader)[0]


def parse_wait_ack_keyed(reader: FrameReader) -> tuple[str | None, str | None]:
    """`206 Wait for output[ IS <item>][ KEY <key>]` (PUT ... WAIT ... KEY *): (item, key)."""
    line = need_line(reader)
    if not line.startswith(b"206 Wait for output"):
        if line[:1] == b"2":
            raise BadReply(f"unexpected reply to PUT ... WAIT: {line!r}")
        raise error_for(line)
    words = line[19:].split()
    values = dict(zip(words[::2], words[1::2], strict=False))
    if len(words) % 2 or not values.keys() <= {b"IS", b"KEY"} or len(values) != len(words) // 2:
        raise BadReply(f"unexpected reply to PUT ... WAIT: {line!r}")
    item, key = values.get(b"IS"), values.get(b"KEY")
    return (None if item is None else item.decode("ascii"), None if key is None else key.decode("ascii"))


def _job_block(header: bytes, reader: FrameReader) -> Job:
    """A job from `<q> <id> <prio> <len>[ IS <item>][ KEY <key> ATTEMPT <n>[ TRACE <tp>]]` and
    its data block."""
    parts = header.split(b" ")
    trace = None
    if len(parts) >= 10 and parts[-2] == b"TRACE":  # GET ... KEYS TRACES, a traced job
        trace = parts[-1].decode("ascii")
        del parts[-2:]
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
    data = need_block(reader, int(parts[3]))
    return Job(parts[0].decode("ascii"), int(parts[1]), int(parts[2]), data, item, key, attempt,
               trace)


def parse_get(reader: FrameReader) -> list[Job]:
    """GET/GETB/GETBE, with or without COUNT: the jobs handed out; [] on `404 Queue Empty`."""
    line = need_line(reader)
    rest = ok_text(line)
    if rest:
        if rest.endswith(b" JOBS"):
            return [_job_block(need_line(reader), reader) for _ in range(int(rest[:-5]))]
        return [_job_block(rest, reader)]
    if line == b"404 Queue Empty":
        return []
    if rest is not None:
        raise BadReply(f"unexpected reply to GET: {line!r}")
    raise error_for(line)


def parse_job(reader: FrameReader) -> Job:
    """Exactly one job (the output job delivered to a PUT ... WAIT caller)."""
    jobs = parse_get(reader)
    if len(jobs) != 1:
        raise BadReply(f"expected one job, got {len(jobs)}")
    return jobs[0]


_NOT_FOUND: Final = DoneResult(found=False)
_DONE_RESULTS: Final = {
    b"": DoneResult(True, False, False),
    b"FINQ": DoneResult(True, True, False),
    b"FINI": DoneResult(True, False, True),
    b"FINQ FINI": DoneResult(True, True, True),
}


def _done_line(line: bytes) -> DoneResult | None:
    rest = ok_text(line)
    if rest is not None:
        result = _DONE_RESULTS.get(rest)
        if result is None:
            raise BadReply(f"unexpected reply to DONE: {line!r}")
        return result
    return _NOT_FOUND if line == JOB_NOT_FOUND else None


def _later_line(line: bytes) -> bool | None:
    if line == OK:
        return True
    return False if line == JOB_NOT_FOUND else None


def done_parser(count: int) -> Parser[list[DoneResult]]:
    """The parser of the reply to `DONE <id> ...` naming `count` ids."""

    def parse_done(reader: FrameReader) -> list[DoneResult]:
        return per_id_lines(reader, count, _done_line)

    return parse_done


def later_parser(count: int) -> Parser[list[bool]]:
    """The parser of the reply to `LATER <id> ...` naming `count` ids: found or not, per id."""

    def parse_later(reader: FrameReader) -> list[bool]:
        return per_id_lines(reader, count, _later_line)

    return parse_later


def parse_total(reader: FrameReader) -> Total:
    """`200 OK <queues> <priorities> <jobs> <running>`."""
    queues, priorities, jobs, running = map(int, ok_fields(reader, "TOTAL", count=4, of="4 numbers"))
    return Total(queues, priorities, jobs, running)


def parse_interconnect(reader: FrameReader) -> int:
    """`200 OK <server id>`."""
    [server_id] = ok_fields(reader, "INTERCONNECT", count=1, of="one id")
    return int(server_id)


def parse_server_id(reader: FrameReader) -> int | None:
    """The reply to INTERCONNECT: the server's id, None on an error status (it has none)."""
    try:
        return parse_interconnect(reader)
    except QueueServerError as error:
        refusal(error)
        return None


def parse_serving(reader: FrameReader) -> bool | None:
    """The reply to ROLE (PROTOCOL.md Part B): True for a primary that acknowledges now
    (its lease held or unmanaged, sync not refusing), False for a replica or a primary
    that may not acknowledge, None for a server without ROLE (any other reply)."""
    words = (ok_text(need_line(reader).rstrip(b"\r")) or b"").split()
    if len(words) < 6:
        return None
    return words[0] == b"primary" and words[1] != b"refusing" and words[5] != b"lapsed"


def parse_holding(reader: FrameReader) -> bool:
    """The reply to ROLE from a server that holds a request's reply (client/wait_check.py):
    False for one that may never send it (a replica; a primary whose lease lapsed, as when
    it is cut off from the manager, which promotes another), True for a primary that may
    (its lease held or unmanaged, refusing in sync mode until a replica confirms included)
    and for a server without ROLE (any other reply)."""
    words = (ok_text(need_line(reader).rstrip(b"\r")) or b"").split()
    return len(words) < 6 or (words[0] == b"primary" and words[5] != b"lapsed")


def parse_stats_latency(reader: FrameReader) -> dict[str, Any]:
    """`STATS LATENCY` (Part B): `{"bounds_s": [...], "queues": {name: {...}}}`, as sent."""
    data = sized_block(reader, "STATS LATENCY")
    document = json.loads(data)
    if not isinstance(document, dict) or not isinstance(document.get("queues"), dict):
        raise BadReply(f"STATS LATENCY JSON lacks its queues: {data[:200]!r}")
    return document


def parse_stats(reader: FrameReader) -> dict[str, QueueStats]:
    """`200 OK <len>` CRLF `<json>`: queue name -> QueueStats."""
    data = sized_block(reader, "STATS")
    document = json.loads(data)
    if not isinstance(document, dict):
        raise BadReply(f"STATS JSON is not an object: {data[:200]!r}")
    try:
        return {queue: queue_stats(queue, entry) for queue, entry in document.items()}
    except (KeyError, TypeError, AttributeError) as exc:
        raise BadReply(f"STATS entry lacks or mistypes {exc}") from exc


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

    def parse_runlist(reader: FrameReader) -> list[RunningJob]:
        [count] = ok_fields(reader, "RUNLIST", count=1, of="one count")
        jobs = [_running_line(need_line(reader), with_length=with_data) for _ in range(int(count))]
        if not with_data:
            return jobs
        return [RunningJob(job.id, job.queue, job.priority, job.length, job.expires_at,
                           need_block(reader, job.length or 0)) for job in jobs]

    return parse_runlist
