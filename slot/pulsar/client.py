"""The blocking permit client of the pulsar: take permits of a limiter by name, report outcomes.

    permits = PermitClient()                 # SLOTMAP_PULSAR or tcp://127.0.0.1:7510
    permits.acquire("ga")                    # blocks until the cluster may make one more call
    permits.report("ga", SLOW_DOWN)          # the rate is cut for every slot

Handlers reach it through `slot.permits` (their `self.limiter`, and PermitClient itself).
"""
from __future__ import annotations

import itertools
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import zmq

from config.curve import ClientCurve
from config.models import RateLimitConfig
from slot.pulsar.errors import PermitError, PermitFrameError, PermitTimeout
from slot.pulsar.protocol import (
    MAX_PERMITS_PER_REQUEST,
    AckReply,
    AcquireRequest,
    ErrorReply,
    Feedback,
    GrantReply,
    LimiterView,
    LimitsRequest,
    Reply,
    ReportRequest,
    Request,
    ResumeRequest,
    StateReply,
    StateRequest,
    decode_reply,
    default_endpoint,
)

log = logging.getLogger(__name__)

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
# What a postponed job waits when the pulsar could not be asked.
UNREACHABLE_DELAY_S = 5.0


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

    def resume(self, limiter: str) -> None:
        """Lift the limiter's pause (an admin's word); PermitError when the pulsar does not answer
        or has no such limiter."""
        request = ResumeRequest(id=next(self._ids), limiter=limiter)
        reply = self._ask(request, self.clock() + self.reply_timeout_s)
        if reply is None:
            raise PermitError(f"no reply from the pulsar at {self.endpoint}")
        _expect(reply, AckReply, request)

    def set_limits(self, limits: Mapping[str, RateLimitConfig]) -> list[str]:
        """Every limiter as `limits` has it (the manager's config reload); what changed, a line
        each. PermitError when the pulsar does not answer."""
        request = LimitsRequest(id=next(self._ids), limits=dict(limits))
        reply = self._ask(request, self.clock() + self.reply_timeout_s)
        if reply is None:
            raise PermitError(f"no reply from the pulsar at {self.endpoint}")
        return _expect(reply, AckReply, request).changes

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
