"""Outcome notes: each job's outcome, written to the master's lease pipe the moment it is known
(pure encode and decode; slot/leases.py writes, master/settle.py reads).

Why: a slot acknowledges its batch when handle() returns. If it dies first (os._exit, a
signal, a kill), the master settles the batch: it must know what the handler already
decided, so that a job resolved DONE is never run again because a later job crashed.
A write(2) that returned is in the kernel, so the master reads the note even if the slot
dies the next instant. The master keeps the raw lines of the current batch and parses them
only if the slot dies holding it (on the all-good path: one small write per job, no parse).

One line each, told apart from lease notes (JSON objects, `{...`) by the first byte:
    S                                     the slot reached its job loop (once, before its first fetch)
    D <id>                                DONE
    L <id> <delay_s|->                    LATER
    B <id>                                given back by a retarget (LATER ... FRONT, in note order)
    F <id> <0|1 dead> <error as a JSON string>
    R <id> <item as a JSON string> <reply data, base64>   reply (the job is DONE)
"""
from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

# A reply above this is not noted (the pipe would hold the slot while the master reads it):
# if the slot dies before the batch ends, its job is run again like an unresolved one.
MAX_NOTED_REPLY_BYTES = 16 * 1024
# The error kept in a note (head and tail); the FAIL the slot sends itself keeps 16 KiB.
MAX_NOTED_ERROR_CHARS = 2048

STARTED = b"S\n"


class NoteKind(StrEnum):
    DONE = "D"
    LATER = "L"
    FAIL = "F"
    REPLY = "R"
    GIVEN_BACK = "B"


@dataclass(frozen=True, slots=True)
class NotedOutcome:
    """One job's outcome as the master reads it back."""

    kind: NoteKind
    job_id: int
    delay_s: float | None = None
    dead: bool = False
    error: str | None = None
    item: str | None = None
    reply: bytes | None = None


def done_note(job_id: int) -> bytes:
    return b"D %d\n" % job_id


def given_back_notes(job_ids: Sequence[int]) -> bytes:
    """The jobs a retarget gave back, in their order: one line each, written at once."""
    return b"".join(b"B %d\n" % job_id for job_id in job_ids)


def later_note(job_id: int, delay_s: float | None) -> bytes:
    return b"L %d %s\n" % (job_id, b"-" if delay_s is None else repr(float(delay_s)).encode())


def fail_note(job_id: int, error: str, *, dead: bool) -> bytes:
    text = _cut(error)
    return b"F %d %d %s\n" % (job_id, int(dead), json.dumps(text).encode())


def reply_note(job_id: int, item: str, data: bytes) -> bytes | None:
    """None for a reply too big to note (MAX_NOTED_REPLY_BYTES)."""
    if len(data) > MAX_NOTED_REPLY_BYTES:
        return None
    return b"R %d %s %s\n" % (job_id, json.dumps(item).encode(), base64.b64encode(data))


def is_outcome_line(line: bytes) -> bool:
    """Outcome and start notes; lease notes are JSON objects."""
    return not line.startswith(b"{")


class NoteError(ValueError):
    """A line that is not an outcome note."""


def parse(line: bytes) -> NotedOutcome:
    """One outcome line (without its newline); NoteError when it is not one."""
    try:
        return _parse(line)
    except NoteError:
        raise
    except (IndexError, ValueError, UnicodeDecodeError, binascii.Error) as exc:
        raise NoteError(f"not an outcome note: {line[:80]!r} ({exc})") from exc


def _parse(line: bytes) -> NotedOutcome:
    parts = line.split(b" ", 2)
    kind = NoteKind(parts[0].decode("ascii"))
    job_id = int(parts[1])
    if kind is NoteKind.DONE or kind is NoteKind.GIVEN_BACK:
        return NotedOutcome(kind, job_id)
    rest = parts[2]
    if kind is NoteKind.LATER:
        delay = None if rest == b"-" else float(rest)
        if delay is not None and not (math.isfinite(delay) and delay >= 0):
            raise NoteError(f"bad delay in {line[:80]!r}")
        return NotedOutcome(kind, job_id, delay_s=delay)
    if kind is NoteKind.FAIL:
        dead, error = rest.split(b" ", 1)
        text = json.loads(error)
        if not isinstance(text, str):
            raise NoteError(f"bad error in {line[:80]!r}")
        return NotedOutcome(kind, job_id, dead=dead == b"1", error=text)
    item_json, _, data = rest.rpartition(b" ")  # base64 holds no space; a JSON item may
    item = json.loads(item_json)
    if not isinstance(item, str):
        raise NoteError(f"bad item in {line[:80]!r}")
    return NotedOutcome(kind, job_id, item=item, reply=base64.b64decode(data, validate=True))


def _cut(text: str) -> str:
    if len(text) <= MAX_NOTED_ERROR_CHARS:
        return text
    head = MAX_NOTED_ERROR_CHARS // 4
    tail = MAX_NOTED_ERROR_CHARS - head
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"
