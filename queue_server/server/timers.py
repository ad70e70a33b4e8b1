"""Expiry and delays: one asyncio timer armed at the store's next deadline. A mixin of
QueueServer, as roles.py is: it knows the server only by the attributes below.

A following replica fires no timer of its own: the primary's SYNC records are its only
changes (its jittered retries, renewed locks), so the two never drift apart.
"""
from __future__ import annotations

import abc
import asyncio
import logging
import time

from config.periodic import TurnBoundary
from queue_server.server.store import Store

log = logging.getLogger("slotmap.queue_server")

TIMER_RETRY_S = 1.0  # an expiry timer that failed fires again after this


class Timers(abc.ABC):
    store: Store
    following: bool
    timer_turns: TurnBoundary
    _timer: asyncio.TimerHandle | None
    _timer_at: float | None

    # QueueServer's (server.py).
    @abc.abstractmethod
    def _after_change(self) -> None: ...

    @abc.abstractmethod
    def _request_flush(self) -> None: ...

    def _arm_timer(self) -> None:
        if self.following:
            return
        deadline = self.store.next_deadline()
        if deadline is None or (self._timer_at is not None and self._timer_at <= deadline):
            return
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_at = deadline
        self._timer = loop.call_at(loop.time() + max(0.0, deadline - time.time()), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        with self.timer_turns:
            self.fire_timers_if_due()
        if self.timer_turns.failures:
            # Expiry must not stop for good: fire again soon (not at once, which would spin).
            loop = asyncio.get_running_loop()
            self._timer_at = time.time() + TIMER_RETRY_S
            self._timer = loop.call_later(TIMER_RETRY_S, self._on_timer)
        self._request_flush()

    def fire_timers_if_due(self, *, dead_ages: bool = False) -> None:
        """Before every request, and from housekeeping with `dead_ages`: dead jobs past
        dead_max_age_s are no deadline, and looking at every queue is no per-request cost."""
        if self.following:
            return
        deadline = self.store.next_deadline()
        if deadline is None and not dead_ages:
            return  # nothing timed anywhere (no lock, delay or TTL): no clock to read per request
        now = time.time()
        if (deadline is not None and deadline <= now) or (dead_ages and self.store.dead_queues_due(now)):
            given_back = self.store.inherited_given_back
            self.store.fire_due(now)
            if self.store.inherited_given_back != given_back:
                log.warning("%d jobs leased before the failover were not renewed within their lock "
                            "time (their hand-out's reply died with the old primary, or their holder "
                            "did): given back at the head of their queue, uncharged",
                            self.store.inherited_given_back - given_back)
            self._after_change()
            self._request_flush()

    def prune_finished_jobs(self) -> None:
        """Housekeeping: finished jobs past their keep_done_s go, recorded as SYNC PRUNE so a
        replica and a replay drop exactly these (kept.py); a replica waits for that record."""
        if not self.following and self.store.prune_kept(time.time()):
            self._after_change()
            self._request_flush()
