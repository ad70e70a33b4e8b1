"""Retry policy of a queue (pure): how long a failed job waits, and when it is dead.

The curve: the n-th failure (n = attempts made so far, 1 after the first run failed)
waits `min(retry_max_s, retry_base_s * 2 ** (n - 1))`, then up to 25% more at random
(jitter spreads a burst of failures so they do not all come back in the same second;
never less, so a retry is never earlier than the curve says).

With the defaults (retry_base_s = 15, retry_max_s = 86400, max_attempts = 25):

    failure  1: 15-19 s         failure  5: 4-5 min        failure 10: 2.1-2.7 h
    failure 13: 17-21 h         failure 14+: 24-30 h (the cap)
    the 25th attempt runs 12.4-15.5 days (about 14) after the first failure
    (Sidekiq's default 25 retries span about 21 days: its first retries are slower, 15-25 s then
    count**4 + 15 s, and it has no cap).

Sidekiq's curve is polynomial (count ** 4); we double instead, with a cap, because the
two figures a user sets (first wait, longest wait) then say everything about it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

DEFAULT_MAX_ATTEMPTS = 25
DEFAULT_RETRY_BASE_S = 15.0
DEFAULT_RETRY_MAX_S = 86400.0
DEFAULT_DEAD_MAX = 10_000
DEFAULT_DEAD_MAX_AGE_S = 15_552_000.0  # 180 days
DEFAULT_ERRORS_KEPT = 5
# Finished jobs kept per queue (JOB, JOBS <q> done, RESULT): at most this many, for at most
# this long. About 180 bytes each beside their data and result (bench/RESULTS.md: 292 B with
# 32-byte data and a 16-byte result), so a queue's last 1,000 jobs: 0.2 MB plus data and results.
DEFAULT_KEEP_DONE_MAX = 1000
DEFAULT_KEEP_DONE_S = 3600.0
DEFAULT_MAX_RESULT_BYTES = 64 * 1024
DEFAULT_KEEP_DONE_TOTAL = 1_000_000  # over all queues: about 0.2 GB beside data and results
JITTER = 0.25  # up to this fraction more, at random


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    retry_base_s: float = DEFAULT_RETRY_BASE_S
    retry_max_s: float = DEFAULT_RETRY_MAX_S

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if not 0 <= self.retry_base_s <= self.retry_max_s:
            raise ValueError(f"need 0 <= retry_base_s ({self.retry_base_s}) <= retry_max_s "
                             f"({self.retry_max_s})")

    def base_delay_s(self, attempt: int) -> float:
        """The wait after failure number `attempt` (>= 1), before jitter."""
        exponent = min(max(attempt, 1) - 1, 64)  # 2**64 * anything passes any cap
        return min(self.retry_max_s, self.retry_base_s * 2.0 ** exponent)

    def delay_s(self, attempt: int, rng: random.Random) -> float:
        """The wait after failure number `attempt`, with jitter (0..25% more)."""
        return self.base_delay_s(attempt) * (1.0 + JITTER * rng.random())

    def is_exhausted(self, attempt: int) -> bool:
        """True when a job that failed its `attempt`-th run is dead (no retry left)."""
        return attempt >= self.max_attempts


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """What the queue server applies to one queue's failed and dead jobs."""

    retry: RetryPolicy = RetryPolicy()
    dead_max: int = DEFAULT_DEAD_MAX
    dead_max_age_s: float = DEFAULT_DEAD_MAX_AGE_S
    errors_kept: int = DEFAULT_ERRORS_KEPT  # a job's error history, last failures first
    keep_done_max: int = DEFAULT_KEEP_DONE_MAX  # 0: finished jobs are not kept
    keep_done_s: float = DEFAULT_KEEP_DONE_S
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES  # a bigger result is not kept (said so)


DEFAULT_POLICY = QueuePolicy()


class QueueSettings(Protocol):
    """The fields of config.models.QueueConfig a policy is made from."""

    max_attempts: int
    retry_base_s: float
    retry_max_s: float
    dead_max: int
    dead_max_age_s: float
    errors_kept: int
    keep_done_max: int
    keep_done_s: float
    max_result_bytes: int


def queue_policy(config: QueueSettings) -> QueuePolicy:
    """A queue's policy from its `[queues.<q>]` config."""
    return QueuePolicy(RetryPolicy(config.max_attempts, config.retry_base_s, config.retry_max_s),
                       config.dead_max, config.dead_max_age_s, config.errors_kept,
                       config.keep_done_max, config.keep_done_s, config.max_result_bytes)
