"""Permits from the cluster-wide rate limiter (the Pulsar): frames, the blocking client, the
handler's `self.limiter`, and the before_batch hook that paces a batch job by job.

The slot is the lower layer, so it owns the frames and the feedback vocabulary; the
manager's limiter (manager/pulsar.py) and service (manager/pulsar_service.py) import them.

In a handler of a queue with a `rate_limit`, each job waits for its permit when handle()
reaches it (iterating or indexing the batch), so calls go out spaced by the rate, never
as a burst of a whole batch; the handler says how each call went:

    for job in jobs:                         # one permit per job, taken here
        response = api.send(job.json())
        if response.status == 429:
            self.limiter.slow_down()         # the rate is cut for every slot
            job.later(delay=1)
        elif response.status == 503:
            self.limiter.pause(60)           # no permits for a minute, cluster-wide
            job.later(delay=60)
        else:
            self.limiter.ok()                # lets a cut rate climb back

A handler that makes its own calls (several per job, or one per batch) sets
`permits_per_job = False` and calls `self.limiter.acquire()` before each one.
Lower level, any limiter by name:

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

import contextlib
import itertools
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum, auto
from typing import Annotated, Any, ClassVar, Literal, TypeVar, overload

import zmq
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from config.curve import ClientCurve
from config.models import QueueConfig
from slot.errors import JobResolutionError
from slot.handler import Outcome, SlotJob, registered_handlers

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "tcp://127.0.0.1:7510"
ENDPOINT_ENV = "SLOTMAP_PULSAR"
LIMITER_NAME = r"^[A-Za-z0-9_.:-]{1,128}$"
MAX_PERMITS_PER_REQUEST = 1_000_000
# A reply larger than this (a state reply of ~16,000 limiters) disconnects whoever sent it:
# a process squatting the pulsar's port cannot make a slot hold a huge frame.
MAX_REPLY_BYTES = 4 * 1024 * 1024
REPLY_TIMEOUT_S = 2.0
# Even a request with no time left gets this long for its reply.
MIN_EXCHANGE_S = 0.1
# A slot waiting for permits looks at its stop flag this often.
STOP_CHECK_S = 0.2
# How far ahead a client reserves its next permit: it asks again this long before its
# turn, so its sleep and the network may be late by as much without losing any rate.
RESERVE_S = 0.25
MAX_RESERVE_S = 1.0
# What a postponed job waits when the pulsar could not be asked.
UNREACHABLE_DELAY_S = 5.0
# How long the before_batch hook waits for one job's permit before postponing the rest.
HOOK_MAX_WAIT_S = 30.0
# ok() reports at most this often per limiter and slot: the pulsar's climb counts the time
# between successes (up to a second), so more reports would add round trips, not rate.
OK_REPORT_EVERY_S = 0.2


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
    # Fields added after the first release, sent only when they differ from their default,
    # so a pulsar or a slot of the release before reads every frame it can act on.
    LATER_FIELDS: ClassVar[frozenset[str]] = frozenset()

    def encode(self) -> bytes:
        unsent = {name for name in self.LATER_FIELDS
                  if getattr(self, name) == type(self).model_fields[name].default}
        return self.model_dump_json(exclude=unsent).encode()


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
        curve: ClientCurve | None = None,
    ) -> None:
        self.endpoint = endpoint or default_endpoint()
        # CURVE keys when the pulsar requires them (config.curve.client_curve).
        self.curve = curve
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
            reserve_s = min(RESERVE_S, max(0.0, deadline - self.clock()))
            request = AcquireRequest(id=next(self._ids), limiter=limiter, n=n - granted,
                                     retry=retry, reserve_s=reserve_s)
            reply = self._ask(request, deadline)
            if reply is None:
                return Taken(granted, UNREACHABLE_DELAY_S, reachable=False)
            grant = _expect(reply, GrantReply, request)
            if grant.start_after_s and not self._sleep_until(self.clock() + grant.start_after_s,
                                                             stopping):
                return Taken(granted, grant.start_after_s)
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
            socket.setsockopt(zmq.MAXMSGSIZE, MAX_REPLY_BYTES)
            if self.curve is not None:
                self.curve.apply(socket)
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


# The handler's limiter


class SlotLimiter:
    """A handler's side of one cluster-wide limiter (`self.limiter` in a handler): wait for
    permits, say how the outside call went. Feedback never raises: a pulsar that does not
    confirm is logged, and the handler goes on. Without a client (a queue with no
    rate_limit) every call returns at once, so one handler runs limited or not."""

    def __init__(
        self, name: str, client: PermitClient | None, *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.client = client
        self.clock = clock
        self.slow_downs = 0
        self._ok_reported_at = -math.inf

    def acquire(self, n: int = 1, *, timeout_s: float | None = None) -> None:
        """Block until `n` permits come (PermitTimeout after `timeout_s`)."""
        if self.client is not None:
            self.client.acquire(self.name, n, timeout_s=timeout_s)

    def ok(self) -> None:
        """The call went through: lets a cut rate climb back (sent at most every 0.2 s)."""
        now = self.clock()
        if now - self._ok_reported_at >= OK_REPORT_EVERY_S:
            self._ok_reported_at = now
            self.report(OK)

    def slow_down(self) -> None:
        """The outside system said "too many requests": the cluster-wide rate is cut."""
        self.slow_downs += 1
        self.report(SLOW_DOWN)

    def pause(self, seconds: float) -> None:
        """The outside system said "stop for a while": no permits anywhere for `seconds`."""
        self.report(pause(seconds))

    def report(self, feedback: Feedback) -> bool:
        """Send `feedback`; False (logged) when the pulsar did not take it."""
        if self.client is None:
            return False
        try:
            return self.client.report(self.name, feedback)
        except PermitError as exc:
            log.warning("limiter %s: %s not taken (%s); the handler goes on", self.name,
                        feedback.kind, exc)
            return False


# The slot process's permit client and its rate-limited queues, from the hook (built with
# the config's pulsar endpoint); a slot without them has only unlimited limiters.
_process_client: PermitClient | None = None
_limited: frozenset[str] = frozenset()
_limiters: dict[str, SlotLimiter] = {}


def use_permit_client(client: PermitClient, limiters: Mapping[str, str]) -> None:
    """The client and the queue -> limiter names that handlers' limiters use in this process."""
    global _process_client, _limited
    _process_client = client
    _limited = frozenset(limiters.values())
    _limiters.clear()


def limiter_for(name: str) -> SlotLimiter:
    """The limiter `name` (a rate-limited queue's limiter is named after the queue); one that
    does nothing when the cluster config gives no such rate_limit."""
    limiter = _limiters.get(name)
    if limiter is None:
        client = _process_client if name in _limited else None
        limiter = _limiters[name] = SlotLimiter(name, client)
    return limiter


# The slot's hook


BeforeBatch = Callable[[str, Sequence[SlotJob]], Sequence[SlotJob]]


class RateLimitHook:
    """A `before_batch` hook: one permit per job of a rate-limited queue's batch, taken when
    the handler reaches the job (PacedJobs), so a batch goes out at the rate, not as a burst.
    When a job's permit does not come within `max_wait_s`, it and the jobs after it are
    postponed (LATER) until the next permit may come, so a slot never holds a locked batch
    through a long pause. A handler class with `permits_per_job = False` gets its batch as
    is and takes permits itself (self.limiter.acquire()). A handler that went through none
    of its batch (a no-op, one call for all) still pays its permits before its next batch,
    and from then on its batches take their permits before it runs."""

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
        # The last batch handed out: the permits of the jobs its handler never reached are
        # taken before the next batch, so every job costs one permit whatever the handler does.
        self._last: PacedJobs | None = None
        # Queues whose handler went through none of its batch (a no-op, or one call for the
        # whole batch): their batches take every permit before the handler runs.
        self._upfront: set[str] = set()
        use_permit_client(client, self.limiters)

    def __call__(self, queue: str, jobs: Sequence[SlotJob]) -> Sequence[SlotJob]:
        """The batch, paced: each job's permit is taken when the handler reaches it."""
        self._settle_last()
        limiter = self.limiters.get(queue)
        if limiter is None or not jobs:
            return jobs
        handler = registered_handlers().get(queue)
        if handler is not None and not handler.permits_per_job:
            return jobs
        if queue in self._upfront:
            return self._take_upfront(queue, limiter, jobs)
        self._last = PacedJobs(queue, jobs, lambda: self._take_one(queue, limiter))
        return self._last

    def _take_upfront(self, queue: str, limiter: str, jobs: Sequence[SlotJob]) -> Sequence[SlotJob]:
        """Every permit of the batch first; the jobs whose permits do not come are postponed."""
        try:
            taken = self.client.take(limiter, len(jobs), wait_s=self.max_wait_s, stopping=self.stopping)
        except PermitError as exc:
            log.error("no permits for queue %s (%s)", queue, exc)
            taken = Taken(0, self.max_wait_s)
        for job in jobs[taken.granted :]:
            job.later(delay_s=taken.retry_after_s)
        return jobs[: taken.granted]

    def _settle_last(self) -> None:
        """A handler that did not go through its batch (one call for all, or none) still
        spends one permit per job: taken now, before its next batch, so the rate holds."""
        last, self._last = self._last, None
        owed = 0 if last is None else last.unreached()
        if last is None or owed == 0:
            return
        if owed == len(last):
            self._upfront.add(last.queue)
        limiter = self.limiters[last.queue]
        try:
            self.client.take(limiter, owed, wait_s=self.max_wait_s, stopping=self.stopping)
        except PermitError as exc:
            log.error("could not take the %d permits owed by the last batch of %s (%s)",
                      owed, last.queue, exc)

    def _take_one(self, queue: str, limiter: str) -> Taken:
        try:
            return self.client.take(limiter, 1, wait_s=self.max_wait_s, stopping=self.stopping)
        except PermitError as exc:
            log.error("no permits for queue %s (%s)", queue, exc)
            return Taken(0, self.max_wait_s)


class PacedJobs(Sequence[SlotJob]):
    """A batch whose jobs are let through one permit at a time, in order, when the handler
    first reaches them (iteration or index). When a permit does not come, that job and every
    later one are postponed and iteration ends there (an index raises PermitTimeout)."""

    def __init__(self, queue: str, jobs: Sequence[SlotJob], take_one: Callable[[], Taken]) -> None:
        self.queue = queue
        self._jobs = list(jobs)
        self._take_one = take_one
        self._admitted = 0
        self._closed = False

    def __len__(self) -> int:
        return len(self._jobs)

    def __iter__(self) -> Iterator[SlotJob]:
        for index, job in enumerate(self._jobs):
            if not self._admit(index):
                return
            yield job

    @overload
    def __getitem__(self, index: int) -> SlotJob: ...
    @overload
    def __getitem__(self, index: slice) -> list[SlotJob]: ...

    def __getitem__(self, index: int | slice) -> SlotJob | list[SlotJob]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._jobs)))]
        job = self._jobs[index]
        if not self._admit(index % len(self._jobs)):
            raise PermitTimeout(f"job {job.id} of {self.queue} was postponed: no permit in time")
        return job

    def unreached(self) -> int:
        """Jobs the handler never reached (and that were not postponed for want of a permit)."""
        return 0 if self._closed else len(self._jobs) - self._admitted

    def _admit(self, index: int) -> bool:
        while self._admitted <= index:
            if self._closed:
                return False
            taken = self._take_one()
            if taken.granted:
                self._admitted += 1
                continue
            self._postpone_rest(taken)
            return False
        return True

    def _postpone_rest(self, taken: Taken) -> None:
        self._closed = True
        rest = [job for job in self._jobs[self._admitted :] if job.outcome is Outcome.DONE
                and job.reply_data is None]
        for job in rest:
            with contextlib.suppress(JobResolutionError):
                job.later(delay_s=taken.retry_after_s)
        log.info("%d of %d jobs of %s postponed by %.2f s: %s", len(rest), len(self._jobs),
                 self.queue, taken.retry_after_s,
                 "no reply from the pulsar" if not taken.reachable else "no permit in time")


def rate_limit_hook(
    client: PermitClient,
    queues: Mapping[str, QueueConfig],
    *,
    max_wait_s: float = HOOK_MAX_WAIT_S,
    stopping: Callable[[], bool] | None = None,
) -> RateLimitHook:
    """The before_batch hook for the queues of a cluster config that have a `rate_limit`."""
    return RateLimitHook(client, limiters_of(queues), max_wait_s=max_wait_s, stopping=stopping)
