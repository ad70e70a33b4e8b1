"""Job keys, attempts, last errors and dead jobs: the store's small value types (no I/O).

A key is global to a server. The server makes `_<n>` from a counter (kept as the int n:
28 bytes per queued job instead of a 57-byte str); a producer's key is a str that never
starts with `_`, so the two never collide.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Final

from queue_server.protocol.numbers import counter_of_name

Key = int | str
KEY_RE: Final = re.compile(rb"[A-Za-z0-9_.:@-]{1,128}")
MAX_ERROR_BYTES: Final = 16 * 1024
# An error that is no longer a job's last one is kept shorter (its end: a traceback's last
# lines say what went wrong), so a job's history costs at most 16 KiB + 4 x 2 KiB by default.
EARLIER_ERROR_BYTES: Final = 2 * 1024
_CUT_MARKER: Final = b"\n[... cut: the error was %d bytes, the first %d are kept]"
_EARLIER_MARKER: Final = "[... cut: the error was %d bytes, the last %d are kept]\n"
# Bounds on a history read from a record (config.models caps errors_kept at 50).
MAX_ERRORS: Final = 50
MAX_ATTEMPT: Final = 2**63 - 1
# PUT ... TRACE: a W3C traceparent of version 00, lower-case hex, ids not all zeros
# (https://www.w3.org/TR/trace-context/#traceparent-header); 55 bytes, kept as given.
TRACEPARENT_RE: Final = re.compile(
    rb"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


# One failed attempt: (unix time, attempt number, error text); a plain tuple of atomic
# values, which the garbage collector stops tracking.
ErrorRecord = tuple[float, int, str]
Errors = tuple[ErrorRecord, ...]


class LastError:
    """The last error of an `errors` history (ErrorRecord's layout read here alone)."""

    __slots__ = ()
    errors: Errors

    @property
    def error(self) -> str | None:
        """The last error."""
        return self.errors[-1][2] if self.errors else None

    @property
    def failed_at(self) -> float | None:
        return self.errors[-1][0] if self.errors else None


@dataclass(frozen=True, slots=True)
class JobMeta(LastError):
    """A waiting job's attempts with the errors of its last failed attempts, oldest first (a
    job that never failed has a plain int instead, and costs nothing more). `solo`: hand it
    out alone; `retry_wait`: delayed by a failure, not run since; `trace`: the W3C
    traceparent it was put with (PUT ... TRACE), which every hand-out shows to GET ... TRACES."""

    attempts: int
    errors: Errors = ()
    solo: bool = False
    retry_wait: bool = False
    trace: bytes | None = None


Meta = int | JobMeta


def attempts_of(meta: Meta) -> int:
    return meta if type(meta) is int else meta.attempts  # type: ignore[union-attr]


def is_retry_wait(meta: Meta) -> bool:
    return type(meta) is JobMeta and meta.retry_wait  # type: ignore[union-attr]


def solo_meta(meta: Meta) -> JobMeta:
    """The same meta, marked to be handed out alone (LATER ... SOLO)."""
    if type(meta) is int:
        return JobMeta(meta, solo=True)
    assert isinstance(meta, JobMeta)
    return JobMeta(meta.attempts, meta.errors, True, meta.retry_wait, meta.trace)


def trace_of(meta: Meta) -> bytes | None:
    return None if type(meta) is int else meta.trace  # type: ignore[union-attr]


def is_solo(meta: Meta) -> bool:
    return type(meta) is JobMeta and meta.solo  # type: ignore[union-attr]


class DeadJob(LastError):
    """A job that used up its attempts (or was failed with DEAD): kept, never handed out."""

    __slots__ = ("attempts", "data", "died_at", "errors", "item", "key", "priority", "queue",
                 "seq", "trace")

    def __init__(self, key: Key, queue: str, priority: int, data: bytes, item: str | None,
                 attempts: int, errors: Errors, died_at: float, trace: bytes | None = None,
                 seq: int = 0) -> None:
        self.key = key
        self.queue = queue
        self.priority = priority
        self.data = data
        self.item = item
        self.attempts = attempts
        self.errors = errors  # the last attempts' errors, oldest first
        self.died_at = died_at
        self.trace = trace  # PUT ... TRACE, kept for a RETRY
        # Its place in the order of death (the server's count): JOBS dead pages resume after it
        # even when the job left meanwhile (job_positions.py).
        self.seq = seq


def key_text(key: Key) -> str:
    return f"_{key}" if type(key) is int else key  # type: ignore[return-value]


def key_bytes(key: Key) -> bytes:
    return b"_%d" % key if type(key) is int else key.encode("ascii")  # type: ignore[union-attr]


def parse_key(raw: bytes) -> Key:
    """A key from the wire (already checked against KEY_RE): `_<n>` is the server's key n
    (up to numbers.COUNTER_NAME_DIGITS digits; a longer one is a plain key, so the key
    counter stays within the bound SYNC IDS accepts)."""
    text = raw.decode("ascii")
    counter = counter_of_name(text)
    return text if counter is None else counter


def cap_error(error: bytes) -> str:
    """The error text as stored: UTF-8 (invalid bytes replaced), at most 16 KiB plus a marker."""
    if len(error) > MAX_ERROR_BYTES:
        error = error[:MAX_ERROR_BYTES] + _CUT_MARKER % (len(error), MAX_ERROR_BYTES)
    return error.decode("utf-8", "replace")


def shorten_earlier(text: str) -> str:
    """An error that is no longer the last: its end, at most EARLIER_ERROR_BYTES (UTF-8)."""
    raw = text.encode("utf-8")
    if len(raw) <= EARLIER_ERROR_BYTES:
        return text
    tail = raw[-EARLIER_ERROR_BYTES:].decode("utf-8", "ignore")
    return _EARLIER_MARKER % (len(raw), EARLIER_ERROR_BYTES) + tail


def push_error(errors: Errors, record: ErrorRecord, keep: int) -> Errors:
    """The history with `record` added as the last error: the one before it shortened, the
    oldest dropped past `keep`. Pure, so a replay builds the very same history."""
    if keep <= 1 or not errors:
        return (record,)
    last = errors[-1]
    earlier = (*errors[:-1], (last[0], last[1], shorten_earlier(last[2])))
    return (*earlier[max(0, len(earlier) - keep + 1):], record)


def encode_errors(errors: Errors) -> bytes:
    """A history as records carry it (`ERRORS <m>`): JSON `[[at, attempt, text], ...]`,
    oldest first (floats in repr, so they read back exactly)."""
    return json.dumps([list(record) for record in errors], ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")


def decode_errors(raw: bytes) -> Errors:
    """The inverse of encode_errors; ValueError for anything else (nesting too deep included)."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError("ERRORS: nested too deep") from None
    if not isinstance(value, list) or not 0 < len(value) <= MAX_ERRORS:
        raise ValueError(f"ERRORS: a JSON array of 1..{MAX_ERRORS} entries expected")
    errors: list[ErrorRecord] = []
    for entry in value:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], int | float)
                and not isinstance(entry[0], bool) and math.isfinite(entry[0])
                and type(entry[1]) is int and 0 <= entry[1] <= MAX_ATTEMPT
                and isinstance(entry[2], str)):
            raise ValueError("ERRORS: each entry must be [unix time, attempt, text]")
        errors.append((float(entry[0]), entry[1], entry[2]))
    return tuple(errors)
