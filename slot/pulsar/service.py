"""The Pulsar: named rate limiters served over a ZeroMQ ROUTER (acquire, report, state frames).

`poll(timeout_ms)` is one step (wait, then answer every waiting request), so the
manager's loop, a thread (`run_until`) or `slotmap pulsar` can drive it. The answers
come from `answer()`, which needs no socket.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Mapping

import zmq

from config.curve import CurveKeys
from config.curve_server import RouterServer
from config.models import PulsarConfig, QueueConfig, RateLimitConfig
from config.periodic import TurnBoundary
from slot.pulsar.errors import PermitFrameError
from slot.pulsar.limiter import DEFAULT_TUNING, Limiter, Tuning
from slot.pulsar.protocol import (
    DEFAULT_ENDPOINT,
    AckReply,
    AcquireRequest,
    ErrorReply,
    GrantReply,
    LimiterView,
    LimitsRequest,
    Reply,
    Request,
    ResumeRequest,
    StateReply,
    StateRequest,
    decode_request,
)

log = logging.getLogger(__name__)

TICK_MS = 200
# Answer at most this many requests per poll, so a flood cannot starve the caller's loop.
MAX_REQUESTS_PER_POLL = 10_000
DEFAULT_MAX_PAUSE_S = PulsarConfig.model_fields["max_pause_s"].default
DEFAULT_MAX_MESSAGE_BYTES = PulsarConfig.model_fields["max_message_bytes"].default
# Requests waiting per client: a permit client has one request out at a time.
QUEUED_REQUESTS = 100


def limits_of(queues: Mapping[str, QueueConfig]) -> dict[str, RateLimitConfig]:
    """A limiter per queue with a `rate_limit`, named after the queue."""
    return {name: queue.rate_limit for name, queue in queues.items() if queue.rate_limit is not None}


def build_limiters(
    limits: Mapping[str, RateLimitConfig], *, tuning: Tuning = DEFAULT_TUNING,
) -> dict[str, Limiter]:
    return {name: Limiter(limit.permits, limit.period_s, margin=limit.margin, tuning=tuning) for name, limit in limits.items()}


def answer(
    limiters: Mapping[str, Limiter], request: Request, now: float, *,
    max_pause_s: float = DEFAULT_MAX_PAUSE_S, client: Hashable | None = None,
) -> Reply:
    """The reply to one request from `client` (pure: the limiters change, nothing else)."""
    if isinstance(request, StateRequest):
        return StateReply(
            id=request.id, limiters={name: lim.state(now) for name, lim in limiters.items()},
        )
    if isinstance(request, LimitsRequest):
        return ErrorReply(id=request.id, message="limits are set by the service (PulsarService), not answer()")
    limiter = limiters.get(request.limiter)
    if limiter is None:
        known = ", ".join(sorted(limiters)) or "none"
        return ErrorReply(id=request.id, message=f"no limiter {request.limiter!r} (known: {known})")
    if isinstance(request, AcquireRequest):
        refused_before = limiter.line.refused_total
        grant = limiter.try_acquire(now, request.n, retry=request.retry, reserve_s=request.reserve_s,
                                    client=client)
        if limiter.line.refused_total > refused_before and _is_power_of_two(limiter.line.refused_total):
            log.warning("limiter %s: its line is full (%d clients hold a place), %d requests refused a place "
                        "so far: a flood of new clients? Logged at every power of two",
                        request.limiter, len(limiter.line), limiter.line.refused_total)
        return GrantReply(id=request.id, granted=grant.granted, retry_after_s=grant.retry_after_s,
                          start_after_s=grant.start_after_s)
    if isinstance(request, ResumeRequest):
        if limiter.resume(now):
            log.warning("limiter %s: pause lifted by an admin", request.limiter)
        return AckReply(id=request.id)
    before = limiter.state(now)
    if not limiter.report(now, request.feedback(), max_pause_s=max_pause_s):
        log.warning("limiter %s: a pause of %g s was cut to [pulsar] max_pause_s %g s (%d cut so far)",
                    request.limiter, request.pause_s, max_pause_s, limiter.capped_pauses)
    _log_change(request.limiter, before, limiter.state(now))
    return AckReply(id=request.id)


def _is_power_of_two(count: int) -> bool:
    return count & (count - 1) == 0


def _log_change(name: str, before: LimiterView, after: LimiterView) -> None:
    if after.current_per_s < before.current_per_s:
        log.info("limiter %s slowed down: %.3g -> %.3g permits/s (configured %.3g)",
                 name, before.current_per_s, after.current_per_s, after.configured_per_s)
    elif after.current_per_s == after.configured_per_s > before.current_per_s:
        log.info("limiter %s is back at its configured %.3g permits/s", name, after.configured_per_s)
    if after.pauses > before.pauses:
        log.info("limiter %s paused: no permits for %.1f s", name, after.paused_for_s)


class PulsarService:
    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        limits: Mapping[str, RateLimitConfig] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        tuning: Tuning = DEFAULT_TUNING,
        max_pause_s: float = DEFAULT_MAX_PAUSE_S,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        curve: CurveKeys | None = None,
        authorized_keys_dir: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.clock = clock
        self.max_pause_s = max_pause_s
        self.limits = dict(limits or {})
        self.tuning = tuning
        self.limiters = build_limiters(self.limits, tuning=tuning)
        self._server = RouterServer(endpoint, max_message_bytes=max_message_bytes,
                                    queued_messages=QUEUED_REQUESTS, curve=curve,
                                    authorized_keys_dir=authorized_keys_dir)
        self.socket = self._server.socket
        self.failing = TurnBoundary("answering a pulsar request", log=log,
                                    next_turn="its client gets an error reply, the others their answers")

    @classmethod
    def from_config(
        cls, config: PulsarConfig, limits: Mapping[str, RateLimitConfig], *, endpoint: str | None = None,
        curve: CurveKeys | None = None, authorized_keys_dir: str | None = None,
    ) -> PulsarService:
        return cls(
            endpoint or config.listen, limits, max_pause_s=config.max_pause_s,
            max_message_bytes=config.max_message_bytes, curve=curve,
            authorized_keys_dir=authorized_keys_dir,
        )

    def poll(self, timeout_ms: int) -> int:
        """Wait up to `timeout_ms` for a request, answer every one waiting; return how many."""
        if not self.socket.poll(max(0, timeout_ms), zmq.POLLIN):
            return 0
        answered = 0
        while answered < MAX_REQUESTS_PER_POLL:
            try:
                parts = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            answered += 1
            if len(parts) != 2:
                log.warning("dropping a %d-part message to the pulsar", len(parts))
                continue
            routing_id, frame = parts
            try:
                request = decode_request(frame)
            except PermitFrameError as exc:
                log.warning("dropping a frame from %r: %s", routing_id, exc)
                reply: Reply = ErrorReply(id=0, message=str(exc))
            else:
                reply = self._answer(request, routing_id)
            # A client gone since is no error: ROUTER drops the reply.
            self.socket.send_multipart([routing_id, reply.encode()], zmq.NOBLOCK)
        return answered

    def _answer(self, request: Request, client: bytes) -> Reply:
        # A bug on one request must neither end the pulsar (every rate-limited queue waits on
        # it) nor leave its client waiting out its timeout.
        with self.failing:
            if isinstance(request, LimitsRequest):
                changes = self.apply_limits(request.limits)
                log.info("limits from the manager's config reload: %s", "; ".join(changes) or "no rate_limit changed")
                return AckReply(id=request.id, changes=changes)
            reply = answer(self.limiters, request, self.clock(), max_pause_s=self.max_pause_s, client=client)
            return reply
        return ErrorReply(id=request.id, message="the pulsar failed to answer this request (its log says why)")

    def apply_limits(self, limits: Mapping[str, RateLimitConfig]) -> list[str]:
        """A config reload (SIGHUP): limiters added, retuned or removed; what changed, a line each.
        A retuned limiter keeps its pause, its waiting line and its counts."""
        changes: list[str] = []
        now = self.clock()
        for name in sorted(set(self.limits) | set(limits)):
            old, new = self.limits.get(name), limits.get(name)
            if old == new:
                continue
            if new is None:
                del self.limiters[name]
                changes.append(f"{name}: removed")
            elif old is None:
                self.limiters[name] = build_limiters({name: new}, tuning=self.tuning)[name]
                changes.append(f"{name}: added, {new.permits} per {new.period_s:g} s")
            else:
                self.limiters[name].retune(new.permits, new.period_s, margin=new.margin, now=now)
                changes.append(f"{name}: {old.permits} per {old.period_s:g} s -> {new.permits} per {new.period_s:g} s"
                               f" (margin {new.margin:g})")
        self.limits = dict(limits)
        return changes

    def run_until(self, stopping: Callable[[], bool], *, tick_ms: int = TICK_MS) -> None:
        """Answer requests until `stopping()` (checked every `tick_ms`); for a thread or a CLI."""
        while not stopping():
            self.poll(tick_ms)

    def close(self) -> None:
        self._server.close()


def describe(limits: Mapping[str, RateLimitConfig]) -> str:
    return ", ".join(
        f"{name} {limit.permits} per {limit.period_s:g} s" for name, limit in sorted(limits.items())
    ) or "no limiters"
