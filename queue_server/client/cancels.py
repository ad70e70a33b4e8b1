"""CANCELLED on the client: which jobs the primary cancelled since a position of its ring
(queue_server/protocol/cancels.py). Read by the masters' lease keepers (master/cancels.py)
and the manager (manager/events/cancel_events.py)."""
from __future__ import annotations

import json
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from queue_server.client.effects import Op
from queue_server.client.operations import Client
from queue_server.protocol.cancels import NO_RING, cancelled_request
from queue_server.protocol.client_errors import BadReply
from queue_server.protocol.framing import FrameReader
from queue_server.protocol.job_info import JobInfo
from queue_server.protocol.reply_reading import sized_block


class CancelEntry(BaseModel):
    """One cancel the primary took. `lease` is the id the running job was handed out with
    (0: the job was waiting and was removed, no slot holds it)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    seq: int = Field(ge=1)
    lease: int = Field(ge=0)
    queue: str = Field(max_length=128)
    key: str = Field(max_length=128)
    door: str = Field(max_length=64)
    at: float


class CancelPage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    ring: str = Field(max_length=32)
    last: int = Field(ge=0)
    # Cancels after the position asked for were dropped from the ring before this read
    # (more than its size between two reads): counted, not listed.
    missed: int = Field(default=0, ge=0)
    cancels: tuple[CancelEntry, ...] = ()


def parse_cancel_page(reader: FrameReader) -> CancelPage:
    data = sized_block(reader, "CANCELLED")
    try:
        return CancelPage.model_validate(json.loads(data))
    except (ValueError, ValidationError) as exc:
        raise BadReply(f"bad CANCELLED JSON: {exc}") from exc


def cancelled(client: Client, ring: str = NO_RING, since: int = 0, *,
              until: float | None = None) -> Op[CancelPage]:
    """CANCELLED (Part B): the cancels after position `since` of ring `ring` (NO_RING: all
    the ring holds). `until`: as done()'s (operations.py)."""
    return client._request(cancelled_request(ring, since), parse_cancel_page, read_only=True, until=until)


def not_cancelled_text(queue: str, key: str, info: JobInfo | None) -> tuple[str, bool]:
    """Why CANCEL found nothing, from what JOB says of the key just after: (text, finished).
    `finished`: the queue still holds it as done (kept), so "not found" would mislead."""
    if info is not None and info.queue == queue and info.state == "done":
        at = datetime.fromtimestamp(info.done_at, UTC).strftime(" at %Y-%m-%d %H:%M:%S UTC") if info.done_at else ""
        return f"{key} of {queue} already finished{at}: a finished job cannot be cancelled", True
    if info is not None and info.queue != queue:
        return f"{key}: not found in {queue} (a job {key} is in {info.queue})", False
    return f"{key}: not found in {queue} (done, deleted, or never put)", False
