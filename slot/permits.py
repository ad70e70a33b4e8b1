"""Permits from the cluster-wide rate limiter (the Pulsar): frames, the blocking client, a before_batch hook.

The slot is the lower layer, so it owns the frames and the feedback vocabulary; the
manager's limiter (manager/pulsar.py) and service (manager/pulsar_service.py) import them.

    permits = PermitClient()                 # SLOTMAP_PULSAR or tcp://127.0.0.1:7510
    permits.acquire("ga")                    # blocks until the cluster may make one more call
    try:
        call_the_api()
    except RateLimited:
        permits.report("ga", SLOW_DOWN)      # the rate is cut for every slot
    except DailyLimitExceeded:
        permits.report("ga", pause(3600))    # no permits for an hour
    else:
        permits.report("ga", OK)             # lets a cut rate climb back
"""
from __future__ import annotations

import itertools
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum, auto
from typing import Annotated, Any, Literal, TypeVar

import zmq
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from config.models import QueueConfig
from slot.handler import SlotJob

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "tcp://127.0.0.1:7510"
ENDPOINT_ENV = "SLOTMAP_PULSAR"
LIMITER_NAME = r"^[A-Za-z0-9_.:-]{1,128}$"
MAX_PERMITS_PER_REQUEST = 1_000_000
REPLY_TIMEOUT_S = 2.0
# Even a request with no time left gets this long for its reply.
MIN_EXCHANGE_S = 0.1
# A slot waiting for permits looks at its stop flag this often.
STOP_CHECK_S = 0.2
# What a postponed job waits when the pulsar could not be asked.
UNREACHABLE_DELAY_S = 5.0
# How long the before_batch hook waits for a batch's permits before postponing the rest.
HOOK_MAX_WAIT_S = 30.0


class PermitError(Exception):
    """The pulsar refused a request (unknown limiter, bad frame) or permits did not come in time."""


class PermitFrameError(PermitError):
    """A frame between a permit client and the pulsar that does not decode; it is dropped."""


class PermitTimeout(PermitError):
    """`acquire` gave up: fewer permits than asked came before its timeout."""


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


# Frames: compact JSON validated by pydantic, one decode per direction, one error.


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def encode(self) -> bytes:
        return self.model_dump_json().encode()


class AcquireRequest(_Frame):
    op: Literal["acquire"] = "acquire"
    id: int = Field(ge=0)
    limiter: str = Field(pattern=LIMITER_NAME)
    n: int = Field(default=1, ge=1, le=MAX_PERMITS_PER_REQUEST)
    # True when the client comes back at the time it was told: it is served before first tries.
    retry: bool = False


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


class StateRequest(_Frame):
    op: Literal["state"] = "state"
    id: int = Field(ge=0)


class GrantReply(_Frame):
    op: Literal["grant"] = "grant"
    id: int = Field(ge=0)
    granted: int = Field(ge=0)
    # When to ask again for the rest (0 when all were granted).
    retry_after_s: float = Field(ge=0, allow_inf_nan=False)


class AckReply(_Frame):
    op: Literal["ack"] = "ack"
    id: int = Field(ge=0)


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


class StateReply(_Frame):
    op: Literal["state"] = "state"
    id: int = Field(ge=0)
    limiters: dict[str, LimiterView]


class ErrorReply(_Frame):
    op: Literal["error"] = "error"
    id: int = Field(ge=0)
    message: str


Request = Annotated[AcquireRequest | ReportRequest | StateRequest, Field(discriminator="op")]
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


def limiters_of(queues: Mapping[str, QueueConfig]) -> dict[str, str]:
    """Queue -> limiter name for every queue with a `rate_limit` (the limiter is named after it)."""
    return {name: name for name, queue in queues.items() if queue.rate_limit is not None}


def default_endpoint() -> str:
    return os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT


# The client


@dataclass(frozen=True, slots=True)
class Taken:
    granted: int
    # When more permits may come (0 when all were granted).
    retry_after_s: float
    # False when the pulsar did not answer.
    reachable: bool = True


class PermitClient:
    """Blocking client of the pulsar over a ZeroMQ DEALER, connected on first use (so one
    built before a fork is used safely by the child). Waits between tries are sleeps of the
    `retry_after_s` the pulsar names, never a busy poll."""

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        reply_timeout_s: float = REPLY_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.endpoint = endpoint or default_endpoint()
        self.reply_timeout_s = reply_timeout_s
        self.clock = clock
        self.sleep = sleep
        self._ids = itertools.count(1)
        self._context: zmq.Context[Any] | None = None
        self._socket: zmq.Socket[bytes] | None = None
        self._pid = 0
        self._unreachable = False

    def acquire(self, limiter: str, n: int = 1, *, timeout_s: float | None = None) -> None:
        """Block until `n` permits of `limiter` are granted; PermitTimeout after `timeout_s`
        (the permits taken by then are spent)."""
        wait_s = math.inf if timeout_s is None else timeout_s
        taken = self.take(limiter, n, wait_s=wait_s)
        if taken.granted < n:
            why = "the pulsar did not answer" if not taken.reachable else (
                f"the next permit comes in {taken.retry_after_s:.2f} s"
            )
            raise PermitTimeout(
                f"{taken.granted} of {n} permits of {limiter!r} within {timeout_s} s ({why}); "
                f"the {taken.granted} taken are spent"
            )

    def take(
        self, limiter: str, n: int, *, wait_s: float, stopping: Callable[[], bool] | None = None,
    ) -> Taken:
        """As many of `n` permits as come within `wait_s` (or until `stopping()` says so)."""
        if not 1 <= n <= MAX_PERMITS_PER_REQUEST:
            raise ValueError(f"permits per request must be 1..{MAX_PERMITS_PER_REQUEST}, got {n}")
        deadline = self.clock() + wait_s
        granted = 0
        retry = False
        while True:
            request = AcquireRequest(id=next(self._ids), limiter=limiter, n=n - granted, retry=retry)
            reply = self._ask(request, deadline)
            if reply is None:
                return Taken(granted, UNREACHABLE_DELAY_S, reachable=False)
            grant = _expect(reply, GrantReply, request)
            granted += grant.granted
            if granted >= n:
                return Taken(n, 0.0)
            wake_at = self.clock() + grant.retry_after_s
            if wake_at > deadline or not self._sleep_until(wake_at, stopping):
                return Taken(granted, max(0.0, wake_at - self.clock()))
            retry = True

    def report(self, limiter: str, feedback: Feedback) -> bool:
        """Tell the pulsar how the action went; False (and a warning) when it did not confirm,
        as a handler must not stall on feedback."""
        request = ReportRequest(
            id=next(self._ids), limiter=limiter, outcome=feedback.kind, pause_s=feedback.pause_s,
        )
        reply = self._ask(request, self.clock() + self.reply_timeout_s)
        if reply is None:
            log.warning("the pulsar at %s did not confirm %s for %s; the limiter misses it",
                        self.endpoint, feedback.kind, limiter)
            return False
        _expect(reply, AckReply, request)
        return True

    def states(self) -> dict[str, LimiterView]:
        """Every limiter's state; PermitError when the pulsar does not answer."""
        request = StateRequest(id=next(self._ids))
        reply = self._ask(request, self.clock() + self.reply_timeout_s)
        if reply is None:
            raise PermitError(f"no reply from the pulsar at {self.endpoint}")
        return _expect(reply, StateReply, request).limiters

    def close(self) -> None:
        if self._pid == os.getpid():
            self._drop_socket()
            if self._context is not None:
                self._context.term()
        self._context = None
        self._socket = None

    def __enter__(self) -> PermitClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Exchanges

    def _ask(self, request: Request, deadline: float) -> Reply | None:
        """Send and wait for the matching reply; after a silent pulsar, a fresh socket (stale
        requests and replies go with the old one) until the deadline."""
        while True:
            wait_s = min(self.reply_timeout_s, max(deadline - self.clock(), MIN_EXCHANGE_S))
            reply = self._exchange(request, wait_s)
            if reply is not None:
                if self._unreachable:
                    self._unreachable = False
                    log.info("the pulsar at %s answers again", self.endpoint)
                return reply
            self._drop_socket()
            if not self._unreachable:
                self._unreachable = True
                log.warning("no reply from the pulsar at %s within %.1f s; asking again until "
                            "the deadline", self.endpoint, wait_s)
            if self.clock() >= deadline:
                return None

    def _exchange(self, request: Request, wait_s: float) -> Reply | None:
        socket = self._connected()
        until = self.clock() + wait_s
        socket.setsockopt(zmq.SNDTIMEO, max(1, math.ceil(wait_s * 1000)))
        try:
            socket.send(request.encode())
        except zmq.Again:
            return None
        while True:
            left_ms = math.ceil((until - self.clock()) * 1000)
            if left_ms <= 0 or not socket.poll(left_ms, zmq.POLLIN):
                return None
            frame = socket.recv(zmq.NOBLOCK)
            try:
                reply = decode_reply(frame)
            except PermitFrameError as exc:
                log.warning("dropping a reply from the pulsar: %s", exc)
                continue
            if reply.id == request.id:
                return reply
            # Otherwise: the late answer to a request given up on; its permits are spent.

    def _connected(self) -> zmq.Socket[bytes]:
        if self._pid != os.getpid():
            # Inherited over a fork: ZeroMQ objects are not fork-safe, so leave them be.
            self._context, self._socket, self._pid = zmq.Context(), None, os.getpid()
        if self._socket is None:
            assert self._context is not None
            socket: zmq.Socket[bytes] = self._context.socket(zmq.DEALER)
            socket.setsockopt(zmq.LINGER, 0)
            # Queue requests only on a live connection, so none reach a restarted pulsar late.
            socket.setsockopt(zmq.IMMEDIATE, 1)
            socket.connect(self.endpoint)
            self._socket = socket
        return self._socket

    def _drop_socket(self) -> None:
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def _sleep_until(self, wake_at: float, stopping: Callable[[], bool] | None) -> bool:
        """False when `stopping()` turned true before `wake_at`."""
        while True:
            if stopping is not None and stopping():
                return False
            left_s = wake_at - self.clock()
            if left_s <= 0:
                return True
            self.sleep(left_s if stopping is None else min(left_s, STOP_CHECK_S))


R = TypeVar("R", GrantReply, AckReply, StateReply)


def _expect(reply: Reply, kind: type[R], request: Request) -> R:
    if isinstance(reply, ErrorReply):
        raise PermitError(f"the pulsar refused {request.op}: {reply.message}")
    if not isinstance(reply, kind):
        raise PermitFrameError(f"the pulsar answered {request.op} with {reply.op}")
    return reply


# The slot's hook


BeforeBatch = Callable[[str, Sequence[SlotJob]], Sequence[SlotJob]]


class RateLimitHook:
    """A `before_batch` hook: one permit per job of a rate-limited queue's batch. Jobs whose
    permits do not come within `max_wait_s` are postponed (LATER) until the next may come,
    so a slot never holds a locked batch through a long pause."""

    def __init__(
        self,
        client: PermitClient,
        limiters: Mapping[str, str],
        *,
        max_wait_s: float = HOOK_MAX_WAIT_S,
        stopping: Callable[[], bool] | None = None,
    ) -> None:
        self.client = client
        self.limiters = dict(limiters)
        self.max_wait_s = max_wait_s
        self.stopping = stopping

    def __call__(self, queue: str, jobs: Sequence[SlotJob]) -> Sequence[SlotJob]:
        """The jobs to run now; the others are resolved LATER with a delay."""
        limiter = self.limiters.get(queue)
        if limiter is None or not jobs:
            return jobs
        try:
            taken = self.client.take(limiter, len(jobs), wait_s=self.max_wait_s, stopping=self.stopping)
        except PermitError as exc:
            log.error("no permits for queue %s (%s); its batch is postponed by %.0f s",
                      queue, exc, self.max_wait_s)
            taken = Taken(0, self.max_wait_s)
        runnable, postponed = jobs[: taken.granted], jobs[taken.granted :]
        for job in postponed:
            job.later(delay_s=taken.retry_after_s)
        if postponed:
            log.info("%d of %d jobs of %s postponed by %.2f s: %s", len(postponed), len(jobs),
                     queue, taken.retry_after_s,
                     "no reply from the pulsar" if not taken.reachable else "no permits yet")
        return runnable


def rate_limit_hook(
    client: PermitClient,
    queues: Mapping[str, QueueConfig],
    *,
    max_wait_s: float = HOOK_MAX_WAIT_S,
    stopping: Callable[[], bool] | None = None,
) -> RateLimitHook:
    """The before_batch hook for the queues of a cluster config that have a `rate_limit`."""
    return RateLimitHook(client, limiters_of(queues), max_wait_s=max_wait_s, stopping=stopping)
