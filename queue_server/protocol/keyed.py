"""Job keys, attempts, last errors and dead jobs: the store's small value types (no I/O).

A key is global to a server. The server makes `_<n>` from a counter (kept as the int n:
28 bytes per queued job instead of a 57-byte str); a producer's key is a str that never
starts with `_`, so the two never collide.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from queue_server.protocol.numbers import counter_of_name

Key = int | str
KEY_RE: Final = re.compile(rb"[A-Za-z0-9_.:@-]{1,128}")
MAX_ERROR_BYTES: Final = 16 * 1024
_CUT_MARKER: Final = b"\n[... cut: the error was %d bytes, the first %d are kept]"



@dataclass(frozen=True, slots=True)
class JobMeta:
    """A waiting job's attempts with its last failure (a job that never failed has a plain
    int instead). `solo`: hand it out alone; `retry_wait`: delayed by a failure, not run since."""

    attempts: int
    error: str | None = None
    failed_at: float | None = None
    solo: bool = False
    retry_wait: bool = False


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
    return JobMeta(meta.attempts, meta.error, meta.failed_at, True, meta.retry_wait)


def is_solo(meta: Meta) -> bool:
    return type(meta) is JobMeta and meta.solo  # type: ignore[union-attr]


class DeadJob:
    """A job that used up its attempts (or was failed with DEAD): kept, never handed out."""

    __slots__ = ("attempts", "data", "died_at", "error", "failed_at", "item", "key", "priority", "queue")

    def __init__(self, key: Key, queue: str, priority: int, data: bytes, item: str | None,
                 attempts: int, error: str | None, failed_at: float | None, died_at: float) -> None:
        self.key = key
        self.queue = queue
        self.priority = priority
        self.data = data
        self.item = item
        self.attempts = attempts
        self.error = error
        self.failed_at = failed_at
        self.died_at = died_at


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
