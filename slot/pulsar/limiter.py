"""One named cluster-wide rate limiter, pure (the clock is passed in): smooth permits, AIMD feedback.

Permits come from a token bucket refilled at the current rate and holding at most
`capacity` (a tenth of a second of permits, at least one), so a limiter of 10 per second
hands out one permit every 0.1 s instead of 10 at the start of each second. In any window
of w seconds it grants at most configured_per_s * w + capacity (tests/slot/pulsar/
test_pulsar_properties.py holds it to that).

A client told to wait gets its own turn (`retry_after_s`): the turns of waiting clients
are spaced by the rate, so hundreds of slots do not all come back at the same instant,
and a client back at its turn (`retry=True`) goes before clients asking for the first time.

Reservations (Guava's RateLimiter.reserve): a client that names `reserve_s` is granted a
permit that accrues within that long at once, debited from the bucket, with the time to
use it (`start_after_s`). The bucket then schedules the next permit from that turn, not
from when the client comes back: a client late by 10 ms at every turn (a busy machine, a
network hop) used to lose those 10 ms of the rate each time, as the bucket holds only one
permit at 10/s: two slots achieved 79-89% of 10/s. Reservations reach at most `reserve_s`
ahead, so a cut or a pause still takes effect within that long.

Feedback: SLOW_DOWN multiplies the rate by `decrease_factor` (at most once per
`decrease_hold_s`: a burst of "too many requests" is one congestion), PAUSE stops all
permits until it ends, and each OK adds configured_per_s * gap / recovery_s to a cut
rate (additive increase while successes keep coming) up to the configured rate.
"""
from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

from slot.pulsar.protocol import MAX_RESERVE_S, Feedback, FeedbackKind, LimiterView
from slot.pulsar.waiting_line import Place, WaitingLine

# Grants count whole permits of a bucket kept in floats.
EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Tuning:
    # The bucket holds the permits of this many seconds at the current rate (at least one).
    smoothing_s: float = 0.1
    decrease_factor: float = 0.5
    # The cut rate never goes below this fraction of the configured rate.
    min_rate_fraction: float = 1 / 64
    # Slow-downs this soon after a cut are the same congestion: no second cut.
    decrease_hold_s: float = 1.0
    # The furthest ahead a client may reserve a permit (it asks for less).
    max_reserve_s: float = MAX_RESERVE_S
    # Successes bring the rate from zero to the configured rate in this long.
    recovery_s: float = 20.0
    # A client holding a place that asks this much before its turn (less the reserve it
    # may ask for) is not back at its turn: it gets its turn again, and nothing moves.
    early_return_s: float = 0.25
    # A gap between successes counts for the climb up to this long.
    max_climb_gap_s: float = 1.0
    # A client held back (a client before it waits, or it holds a permit for later) is told
    # to come back no sooner than this: no busy loop of a real client.
    held_back_retry_s: float = 0.005


DEFAULT_TUNING = Tuning()


@dataclass(frozen=True, slots=True)
class Grant:
    granted: int
    # When to come back for the rest (0 when all were granted).
    retry_after_s: float
    # The granted permits are reserved: use them no sooner than this.
    start_after_s: float = 0.0


class Limiter:
    def __init__(self, permits: int, period_s: float, *, margin: float = 0.0,
                 tuning: Tuning = DEFAULT_TUNING) -> None:
        if permits < 1 or not (period_s > 0 and math.isfinite(period_s)):
            raise ValueError(f"a limiter needs permits >= 1 and period_s > 0, got {permits}/{period_s}")
        if not 0 <= margin < 1:
            raise ValueError(f"a limiter's margin is a fraction in [0, 1), got {margin}")
        # The rate in force when nothing is cut: the margin is never handed out.
        self.configured_per_s = permits / period_s * (1 - margin)
        self.tuning = tuning
        self.min_rate_per_s = self.configured_per_s * tuning.min_rate_fraction
        self.rate_per_s = self.configured_per_s
        self.tokens = self.capacity
        self.paused_until = -math.inf
        self.granted_total = 0
        self.cuts = 0
        self.pauses = 0
        self.capped_pauses = 0
        self._refilled_at: float | None = None
        # The clients told to wait, and the last turn given out: production up to it is spoken for.
        self.line = WaitingLine()
        self._cut_at = -math.inf
        self._climbed_at = -math.inf

    @property
    def capacity(self) -> float:
        return max(1.0, self.rate_per_s * self.tuning.smoothing_s)

    def try_acquire(self, now: float, n: int = 1, *, retry: bool = False, reserve_s: float = 0.0,
                    client: Hashable | None = None) -> Grant:
        """Grant up to `n` permits now, or reserve the rest when they accrue within `reserve_s`;
        for what is left, the time to come back (`reserve_s` before this client's turn).

        `client` (the pulsar passes the sender's identity) holds one place in the line at a time:
        its `retry` counts only when it holds a place whose turn has come, and asking again
        before that gives the same turn. Without `client` the flag is taken as said."""
        if n < 1:
            raise ValueError(f"ask for at least one permit, got {n}")
        reserve_s = min(max(0.0, reserve_s), self.tuning.max_reserve_s)
        self._refill(now)
        self.line.drop_lapsed(now)
        if client is not None:
            place = self.line.place_of(client)
            held_back = self._held_back(now, client, place, reserve_s)
            if held_back is not None:
                return held_back
            retry = place is not None and not place.holding
            self.line.leave(client)
        paused = now < self.paused_until
        # A newcomer goes behind the turns given out and behind a client late for its turn.
        queued = self.line.end >= now or self.line.first_waiting(now) is not None
        served = retry or not queued
        granted = 0
        if not paused and served:
            # The bucket is below zero while reservations are outstanding.
            granted = max(0, min(n, math.floor(self.tokens + EPSILON)))
            self.tokens -= granted
            self.granted_total += granted
        if granted == n:
            return Grant(n, 0.0)
        chunk = min(n - granted, max(1, math.floor(self.capacity)))
        turn = max(now, self.paused_until) + max(0.0, chunk - self.tokens) / self.rate_per_s
        # A client back at its turn a little before its permit has accrued (its sleep and
        # the network are not exact) waits for that permit only; sent behind the queue it
        # lost a whole turn each time: two slots got 6.8 permits/s of 10 (bench/rate_limit.py).
        if not served:
            turn = max(turn, self.line.end + chunk / self.rate_per_s)
        # One more chunk completes the request: it can be reserved, now or when the client
        # comes back `reserve_s` before its turn.
        last_chunk = granted + chunk == n
        # (Only in a reply that grants nothing at once: a grant has one time of use.)
        if served and granted == 0 and last_chunk and turn - now <= reserve_s:
            # The debt in the bucket places every later turn after this one.
            self.tokens -= chunk
            self.granted_total += chunk
            if client is not None:
                self.line.hold(client, turn)
            return Grant(n, 0.0, start_after_s=turn - now)
        if client is None:
            self.line.promise(turn)
        elif not self.line.join(client, turn):
            # The line is full (a flood of new identities): no place, nothing promised; come
            # back when the line as it stands has been served.
            return Grant(granted, max(self.tuning.early_return_s, self.line.end - now))
        early_s = reserve_s if last_chunk else 0.0
        return Grant(granted, max(0.0, turn - now - early_s))

    def _held_back(
        self, now: float, client: Hashable, place: Place | None, reserve_s: float,
    ) -> Grant | None:
        """Nothing for `client` yet (its turn again, or a later one), or None when it is served."""
        if place is None:
            return None
        if place.holding:
            # One permit at a time per client: a peer asking again before it may use the
            # permit it holds gets none (a flood reserved a second of permits in advance).
            return Grant(0, max(self.tuning.held_back_retry_s, place.turn - now))
        if now < place.turn - self.tuning.max_reserve_s - self.tuning.early_return_s:
            return Grant(0, max(0.0, place.turn - now - reserve_s))
        near_s = min(reserve_s, self.tuning.early_return_s)
        if now >= place.turn - self.tuning.early_return_s or self.line.waits_behind(client, now) is None:
            return None
        # A place before this one waits for the next permit and this one's turn is not near:
        # the permit is theirs (a client asking without pause takes nobody's turn). Near its
        # own turn a client is served (a place before it not back yet is late), so a slow
        # client costs the others no rate.
        return Grant(0, max(self.tuning.held_back_retry_s, place.turn - now - near_s))

    def resume(self, now: float) -> bool:
        """Lift a pause (an admin's word); False when the limiter was not paused."""
        self._refill(now)
        if now >= self.paused_until:
            return False
        self.paused_until = now
        self._refilled_at = now
        # Clients told to come back when the pause ends come back later, whenever that is.
        self.line.forget_promises(now)
        return True

    def report(self, now: float, feedback: Feedback, *, max_pause_s: float = math.inf) -> bool:
        """Apply a handler's feedback; False when a pause was cut to `max_pause_s`."""
        self._refill(now)
        if feedback.kind is FeedbackKind.OK:
            self._climb(now)
        elif feedback.kind is FeedbackKind.SLOW_DOWN:
            self._cut(now)
        else:
            self._pause(now, min(feedback.pause_s, max_pause_s))
            if feedback.pause_s > max_pause_s:
                self.capped_pauses += 1
                return False
        return True

    def state(self, now: float) -> LimiterView:
        self._refill(now)
        return LimiterView(
            configured_per_s=self.configured_per_s,
            current_per_s=self.rate_per_s,
            capacity=self.capacity,
            tokens=max(0.0, self.tokens),
            paused_for_s=max(0.0, self.paused_until - now),
            granted_total=self.granted_total,
            cuts=self.cuts,
            pauses=self.pauses,
            waiting=self.line.waiting(),
            lapsed_places=self.line.lapsed_total,
            refused_places=self.line.refused_total,
            capped_pauses=self.capped_pauses,
        )

    def retune(self, permits: int, period_s: float, *, margin: float, now: float) -> None:
        """A config reload's new rate: permits accrued so far count at the old rate, a cut in
        force stays the same fraction of the new rate, and the turns already given out in the
        waiting line are kept (they were promised; new ones follow at the new rate)."""
        fresh = Limiter(permits, period_s, margin=margin, tuning=self.tuning)  # validates
        self._refill(now)
        fraction = self.rate_per_s / self.configured_per_s
        self.configured_per_s = fresh.configured_per_s
        self.min_rate_per_s = fresh.min_rate_per_s
        self.rate_per_s = max(self.min_rate_per_s, self.configured_per_s * fraction)
        self.tokens = min(self.tokens, self.capacity)

    def _refill(self, now: float) -> None:
        if self._refilled_at is None:
            self._refilled_at = now
            return
        # No permits accrue during a pause; a clock read out of order adds nothing.
        start = max(self._refilled_at, self.paused_until)
        if now > start:
            self.tokens = min(self.capacity, self.tokens + (now - start) * self.rate_per_s)
        self._refilled_at = max(now, self._refilled_at)

    def _climb(self, now: float) -> None:
        gap_s = min(max(0.0, now - self._climbed_at), self.tuning.max_climb_gap_s)
        self._climbed_at = max(now, self._climbed_at)
        step = self.configured_per_s * gap_s / self.tuning.recovery_s
        self.rate_per_s = min(self.configured_per_s, self.rate_per_s + step)

    def _cut(self, now: float) -> None:
        if now - self._cut_at < self.tuning.decrease_hold_s:
            return
        self._cut_at = self._climbed_at = now
        self.cuts += 1
        self.rate_per_s = max(self.min_rate_per_s, self.rate_per_s * self.tuning.decrease_factor)
        self.tokens = min(self.tokens, self.capacity)

    def _pause(self, now: float, pause_s: float) -> None:
        until = now + pause_s
        if until <= self.paused_until:
            return
        self.pauses += 1
        self.paused_until = until
        self.tokens = min(0.0, self.tokens)  # reservations already made stay owed
