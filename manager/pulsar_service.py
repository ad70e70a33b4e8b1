"""The Pulsar: named rate limiters served over a ZeroMQ ROUTER (acquire, report, state frames).

`poll(timeout_ms)` is one step (wait, then answer every waiting request), so the
manager's loop, a thread (`run_until`) or `slotmap pulsar` can drive it. The answers
come from `answer()`, which needs no socket.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import zmq

from config.models import QueueConfig, RateLimitConfig
from manager.pulsar import DEFAULT_TUNING, Limiter, Tuning
from slot.permits import (
    DEFAULT_ENDPOINT,
    AckReply,
    AcquireRequest,
    ErrorReply,
    GrantReply,
    LimiterView,
    PermitFrameError,
    Reply,
    Request,
    StateReply,
    StateRequest,
    decode_request,
)

log = logging.getLogger(__name__)

TICK_MS = 200
# Answer at most this many requests per poll, so a flood cannot starve the caller's loop.
MAX_REQUESTS_PER_POLL = 10_000


def limits_of(queues: Mapping[str, QueueConfig]) -> dict[str, RateLimitConfig]:
    """A limiter per queue with a `rate_limit`, named after the queue."""
    return {name: queue.rate_limit for name, queue in queues.items() if queue.rate_limit is not None}


def build_limiters(
    limits: Mapping[str, RateLimitConfig], *, tuning: Tuning = DEFAULT_TUNING,
) -> dict[str, Limiter]:
    return {name: Limiter(limit.permits, limit.period_s, tuning=tuning) for name, limit in limits.items()}


def answer(limiters: Mapping[str, Limiter], request: Request, now: float) -> Reply:
    """The reply to one request (pure: the limiters change, nothing else)."""
    if isinstance(request, StateRequest):
        return StateReply(
            id=request.id, limiters={name: lim.state(now) for name, lim in limiters.items()},
        )
    limiter = limiters.get(request.limiter)
    if limiter is None:
        known = ", ".join(sorted(limiters)) or "none"
        return ErrorReply(id=request.id, message=f"no limiter {request.limiter!r} (known: {known})")
    if isinstance(request, AcquireRequest):
        grant = limiter.try_acquire(now, request.n, retry=request.retry)
        return GrantReply(id=request.id, granted=grant.granted, retry_after_s=grant.retry_after_s)
    before = limiter.state(now)
    limiter.report(now, request.feedback())
    _log_change(request.limiter, before, limiter.state(now))
    return AckReply(id=request.id)


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
    ) -> None:
        self.endpoint = endpoint
        self.clock = clock
        self.limiters = build_limiters(limits or {}, tuning=tuning)
        self._context: zmq.Context[Any] = zmq.Context()
        self.socket: zmq.Socket[bytes] = self._context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        try:
            self.socket.bind(endpoint)
        except zmq.ZMQError:
            self.close()
            raise

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
                reply: Reply = answer(self.limiters, decode_request(frame), self.clock())
            except PermitFrameError as exc:
                log.warning("dropping a frame from %r: %s", routing_id, exc)
                reply = ErrorReply(id=0, message=str(exc))
            # A client gone since is no error: ROUTER drops the reply.
            self.socket.send_multipart([routing_id, reply.encode()], zmq.NOBLOCK)
        return answered

    def run_until(self, stopping: Callable[[], bool], *, tick_ms: int = TICK_MS) -> None:
        """Answer requests until `stopping()` (checked every `tick_ms`); for a thread or a CLI."""
        while not stopping():
            self.poll(tick_ms)

    def close(self) -> None:
        self.socket.close(linger=0)
        self._context.term()


def describe(limits: Mapping[str, RateLimitConfig]) -> str:
    return ", ".join(
        f"{name} {limit.permits} per {limit.period_s:g} s" for name, limit in sorted(limits.items())
    ) or "no limiters"
