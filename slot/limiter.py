"""A handler's side of a cluster-wide rate limiter (`self.limiter`), apart from the slot's
before_batch hook (slot/permits.py), so that slot/handler.py can give it to a handler
without importing the hook, which imports the handler module.
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping

from slot.pulsar.client import PermitClient
from slot.pulsar.errors import PermitError
from slot.pulsar.protocol import OK, SLOW_DOWN, Feedback, pause

log = logging.getLogger(__name__)

# ok() reports at most this often per limiter and slot: the pulsar's climb counts the time
# between successes (up to a second), so more reports would add round trips, not rate.
OK_REPORT_EVERY_S = 0.2

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
