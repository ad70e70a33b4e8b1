"""A rate-limited queue's limiter as the pulsar sees it (`slotmap limiters` for the dashboard).

One PermitClient per dashboard process, asked under a lock (a ZeroMQ socket is not
thread-safe and FastAPI runs sync routes in a thread pool) with a short reply timeout:
a pulsar that is down costs a page at most about REPLY_TIMEOUT_S and shows as a notice.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from admin_ui.schemas import LimiterStatus
from config.curve import ClientCurve
from config.models import QueueConfig
from slot.pulsar.client import PermitClient
from slot.pulsar.errors import PermitError
from slot.pulsar.protocol import LimiterView

# Long enough for a loaded pulsar on another host, short enough for a page that refreshes.
REPLY_TIMEOUT_S = 0.5


@dataclass(frozen=True, slots=True)
class Readout:
    """Every limiter's state, or why there is none."""

    limiters: Mapping[str, LimiterView]
    error: str | None = None


class LimiterReader:
    """Reads the pulsar's limiter states; never raises for a pulsar that does not answer."""

    def __init__(self, endpoint: str, *, curve: ClientCurve | None = None,
                 reply_timeout_s: float = REPLY_TIMEOUT_S) -> None:
        self.endpoint = endpoint
        self.reply_timeout_s = reply_timeout_s
        self._client = PermitClient(endpoint, reply_timeout_s=reply_timeout_s, curve=curve)
        self._lock = threading.Lock()

    def read(self) -> Readout:
        with self._lock:
            try:
                return Readout(self._client.states())
            except PermitError as exc:
                return Readout({}, f"the pulsar did not answer within {self.reply_timeout_s:g} s ({exc})")

    def resume(self, limiter: str) -> str | None:
        """Lift the limiter's pause; why not (None when the pulsar took it)."""
        with self._lock:
            try:
                self._client.resume(limiter)
            except PermitError as exc:
                return str(exc)
            return None

    def close(self) -> None:
        with self._lock:
            self._client.close()


def limiter_status(queue: str, config: QueueConfig | None, readout: Readout | None) -> LimiterStatus | None:
    """The queue's limiter (named after the queue) for the page and API; None without a rate_limit."""
    if config is None or config.rate_limit is None:
        return None
    limit = config.rate_limit
    configured_per_s = limit.permits / limit.period_s
    if readout is None:
        return LimiterStatus(name=queue, configured_per_s=configured_per_s, reachable=False,
                             error="no pulsar configured for the dashboard")
    if readout.error is not None:
        return LimiterStatus(name=queue, configured_per_s=configured_per_s, reachable=False,
                             error=readout.error)
    view = readout.limiters.get(queue)
    if view is None:
        # The pulsar builds its limiters from its own config: one without this queue's
        # rate_limit runs with another config than the dashboard's.
        return LimiterStatus(name=queue, configured_per_s=configured_per_s, reachable=True,
                             error=f"the pulsar has no limiter {queue!r} (does it run with this config?)")
    return LimiterStatus(
        name=queue, configured_per_s=configured_per_s, reachable=True,
        pulsar_configured_per_s=view.configured_per_s, current_per_s=view.current_per_s,
        granted_total=view.granted_total, cuts=view.cuts, pauses=view.pauses,
        paused_for_s=view.paused_for_s,
    )
