"""What a permit client and the pulsar say to each other: the feedback vocabulary and the frames.

Frames are compact JSON over a ZeroMQ DEALER/ROUTER pair, one request and one reply each,
matched by `id`. Nothing here imports ZeroMQ: the dashboard, the CLI and the limiter load
the vocabulary without the sockets.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from enum import StrEnum, auto
from typing import Annotated, Literal, TypeVar

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from config.bounded import MAX_QUEUES
from config.frames import Frame
from config.models import RateLimitConfig
from slot.pulsar.errors import PermitFrameError

DEFAULT_ENDPOINT = "tcp://127.0.0.1:7510"
ENDPOINT_ENV = "SLOTMAP_PULSAR"
LIMITER_NAME = r"^[A-Za-z0-9_.:-]{1,128}$"
MAX_PERMITS_PER_REQUEST = 1_000_000
# The furthest ahead a client may reserve a permit.
MAX_RESERVE_S = 1.0


def default_endpoint() -> str:
    return os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT


# Feedback: what a handler says about the action a permit allowed.


class FeedbackKind(StrEnum):
    OK = auto()
    # "Too many requests": cut the rate (multiplicative decrease).
    SLOW_DOWN = auto()
    # "Stop for a while" (a daily quota): no permits of this limiter for `pause_s`.
    PAUSE = auto()


@dataclass(frozen=True, slots=True)
class Feedback:
    kind: FeedbackKind
    pause_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind is FeedbackKind.PAUSE:
            if not (math.isfinite(self.pause_s) and self.pause_s > 0):
                raise ValueError(f"a pause needs a finite pause_s > 0, got {self.pause_s!r}")
        elif self.pause_s != 0.0:
            raise ValueError(f"only a pause has pause_s (got {self.kind} with {self.pause_s!r})")


OK = Feedback(FeedbackKind.OK)
SLOW_DOWN = Feedback(FeedbackKind.SLOW_DOWN)


def pause(seconds: float) -> Feedback:
    """Stop every permit of the limiter for `seconds`."""
    return Feedback(FeedbackKind.PAUSE, float(seconds))


# Frames: one decode per direction (the `op` field tells the frames apart), one error.


class _Frame(Frame):
    DECODE_ERROR = PermitFrameError


class AcquireRequest(_Frame):
    op: Literal["acquire"] = "acquire"
    id: int = Field(ge=0)
    limiter: str = Field(pattern=LIMITER_NAME)
    n: int = Field(default=1, ge=1, le=MAX_PERMITS_PER_REQUEST)
    # True when the client comes back at the time it was told: it is served before first tries.
    retry: bool = False
    # Permits that accrue within this long may be granted at once, to be used at their time.
    reserve_s: float = Field(default=0.0, ge=0, le=MAX_RESERVE_S, allow_inf_nan=False)
    LATER_FIELDS = frozenset({"reserve_s"})


class ReportRequest(_Frame):
    op: Literal["report"] = "report"
    id: int = Field(ge=0)
    limiter: str = Field(pattern=LIMITER_NAME)
    outcome: FeedbackKind
    pause_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _pause_has_seconds(self) -> ReportRequest:
        self.feedback()
        return self

    def feedback(self) -> Feedback:
        return Feedback(self.outcome, self.pause_s)


class ResumeRequest(_Frame):
    """An admin lifts a limiter's pause (`slotmap limiters resume`, the dashboard)."""

    op: Literal["resume"] = "resume"
    id: int = Field(ge=0)
    limiter: str = Field(pattern=LIMITER_NAME)


class LimitsRequest(_Frame):
    """The manager's config reload: every limiter as the reloaded file has it (queue name ->
    its rate_limit); limiters not named are removed. Answered with the changes, a line each."""

    op: Literal["limits"] = "limits"
    id: int = Field(ge=0)
    limits: dict[Annotated[str, Field(pattern=LIMITER_NAME)], RateLimitConfig] = Field(max_length=MAX_QUEUES)


class StateRequest(_Frame):
    op: Literal["state"] = "state"
    id: int = Field(ge=0)


class GrantReply(_Frame):
    op: Literal["grant"] = "grant"
    id: int = Field(ge=0)
    granted: int = Field(ge=0)
    # When to ask again for the rest (0 when all were granted).
    retry_after_s: float = Field(ge=0, allow_inf_nan=False)
    # The granted permits are reserved: use them no sooner than this.
    start_after_s: float = Field(default=0.0, ge=0, le=MAX_RESERVE_S, allow_inf_nan=False)
    LATER_FIELDS = frozenset({"start_after_s"})


class AckReply(_Frame):
    op: Literal["ack"] = "ack"
    id: int = Field(ge=0)
    # A LimitsRequest's: what changed, a line per limiter.
    changes: list[str] = Field(default_factory=list, max_length=MAX_QUEUES)
    LATER_FIELDS = frozenset({"changes"})


class LimiterView(_Frame):
    """One limiter as the dashboard shows it."""

    configured_per_s: float
    current_per_s: float
    capacity: float
    tokens: float
    paused_for_s: float
    granted_total: int
    cuts: int
    pauses: int
    # Clients waiting for a turn; places given up by clients that did not come back; clients
    # refused a place because the line was full (a flood); pauses cut to max_pause_s.
    waiting: int = 0
    lapsed_places: int = 0
    refused_places: int = 0
    capped_pauses: int = 0
    LATER_FIELDS = frozenset({"waiting", "lapsed_places", "refused_places", "capped_pauses"})


class StateReply(_Frame):
    op: Literal["state"] = "state"
    id: int = Field(ge=0)
    limiters: dict[str, LimiterView]


class ErrorReply(_Frame):
    op: Literal["error"] = "error"
    id: int = Field(ge=0)
    message: str


Request = Annotated[AcquireRequest | ReportRequest | ResumeRequest | StateRequest | LimitsRequest,
                    Field(discriminator="op")]
Reply = Annotated[GrantReply | AckReply | StateReply | ErrorReply, Field(discriminator="op")]
_REQUEST: TypeAdapter[Request] = TypeAdapter(Request)
_REPLY: TypeAdapter[Reply] = TypeAdapter(Reply)
T = TypeVar("T")


def decode_request(frame: bytes) -> Request:
    return _decode(_REQUEST, frame, "request")


def decode_reply(frame: bytes) -> Reply:
    return _decode(_REPLY, frame, "reply")


def _decode(adapter: TypeAdapter[T], frame: bytes, what: str) -> T:
    try:
        return adapter.validate_json(frame)
    except ValidationError as exc:
        raise PermitFrameError(f"bad pulsar {what} frame ({len(frame)} bytes): {exc}") from exc
