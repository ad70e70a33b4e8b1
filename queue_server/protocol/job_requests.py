"""Pure request encoding for the keyed-job commands (PROTOCOL.md Part B): FAIL, TOUCH,
JOB, JOBS, RETRY, DELETE, and the KEY option of PUT. A bad argument raises ValueError
before anything is sent."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from queue_server.protocol.job_info import JOB_STATES
from queue_server.protocol.job_positions import check_position
from queue_server.protocol.job_search import JobsSearch, search_words
from queue_server.protocol.requests import CRLF, job_id, key, name, seconds

MAX_ERROR_BYTES: Final = 16 * 1024
JOBS_LIMIT_MAX: Final = 1000
_RETRY_ALL: Final = {"dead": b" ALL DEAD", "failed": b" ALL FAILED"}


def _keys(values: Sequence[str]) -> list[bytes]:
    if not values:
        raise ValueError("at least one job key expected")
    parts: list[bytes] = []
    for value in values:
        parts += (b" ", key(value))
    return parts


class FailRequest(Protocol):
    """One FAIL of QueueClient.fail_many (slot.outcomes.Failure is one)."""

    @property
    def id(self) -> int: ...
    @property
    def error(self) -> str: ...
    @property
    def delay_s(self) -> float | None: ...
    @property
    def dead(self) -> bool: ...
    @property
    def solo(self) -> bool: ...


def fail_request(lease_id: int, error: str | bytes, *, delay_s: float | None = None,
                 dead: bool = False, solo: bool = False) -> bytes:
    """`FAIL <id> [DELAY <s>] [DEAD] [SOLO] <len>` + the error text (cut to 16 KiB by the server)."""
    body = error.encode("utf-8", "replace") if isinstance(error, str) else bytes(error)
    parts = [b"FAIL ", job_id(lease_id)]
    if delay_s is not None:
        parts += (b" DELAY ", seconds(delay_s, what="delay_s"))
    if dead:
        parts.append(b" DEAD")
    if solo:
        parts.append(b" SOLO")
    parts += (b" %d" % len(body), CRLF, body)
    return b"".join(parts)


def touch_request(ids: Sequence[int], *, expire_s: float | None = None) -> bytes:
    """`TOUCH <id> [<id> ...] [EXPIRE <s>]`."""
    if not ids:
        raise ValueError("TOUCH needs at least one job id")
    parts = [b"TOUCH"]
    for value in ids:
        parts += (b" ", job_id(value))
    if expire_s is not None:
        parts += (b" EXPIRE ", seconds(expire_s, what="expire_s"))
    parts.append(CRLF)
    return b"".join(parts)


def job_request(value: str, *, errors: bool = False) -> bytes:
    """`JOB <key>[ ERRORS]`."""
    return b"JOB " + key(value) + (b" ERRORS" if errors else b"") + CRLF


def jobs_request(queue: str, state: str, *, limit: int = 100, after: str | None = None,
                 at: str | None = None, search: JobsSearch | None = None) -> bytes:
    """`JOBS <q> <state> [LIMIT <n>] [AFTER <key> [AT <position>]]`, and with `search` its
    words (a search)."""
    if state not in JOB_STATES:
        raise ValueError(f"state must be one of {', '.join(JOB_STATES)}, got {state!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= JOBS_LIMIT_MAX:
        raise ValueError(f"limit must be an integer in 1..{JOBS_LIMIT_MAX}, got {limit!r}")
    parts = [b"JOBS ", name(queue), b" ", state.encode(), b" LIMIT %d" % limit]
    if after is not None:
        parts += (b" AFTER ", key(after))
        if at is not None:
            parts += (b" AT ", check_position(at))
    elif at is not None:
        raise ValueError("at (a row's position) needs after (that row's key)")
    if search is not None:
        parts += search_words(search)
    parts.append(CRLF)
    return b"".join(parts)


def retry_request(queue: str, keys: Sequence[str]) -> bytes:
    return b"".join([b"RETRY ", name(queue), *_keys(keys), CRLF])


def retry_all_request(queue: str, state: str = "dead") -> bytes:
    suffix = _RETRY_ALL.get(state)
    if suffix is None:
        raise ValueError(f"retry_all state must be 'dead' or 'failed', got {state!r}")
    return b"RETRY " + name(queue) + suffix + CRLF


def delete_request(queue: str, keys: Sequence[str]) -> bytes:
    return b"".join([b"DELETE ", name(queue), *_keys(keys), CRLF])


def cancel_request(queue: str, key: str) -> bytes:
    return b"".join([b"CANCEL ", name(queue), *_keys((key,)), CRLF])


def delete_all_dead_request(queue: str) -> bytes:
    return b"DELETE " + name(queue) + b" ALL DEAD" + CRLF
