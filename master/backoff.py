"""How fast a queue's slots are forked again (pure): a backoff after failed starts, a budget
after crashes.

- A failed start (setup() raised, no handler, or any unrequested death before the slot's
  first fetch) would only fail again: the queue's next fork waits base_s, then twice that,
  ... up to max_s. A slot that reaches its job loop resets its queue.
- A slot that died in its job loop (a job crashed it) is replaced at once: one job's crash
  must not stop its queue. Only a handler that crashes on every job could then fork without
  end, so forks that replace crashed slots draw on a per-queue budget, a token bucket
  refilled by the clock (CRASH_FORKS_PER_S a second, up to CRASH_FORK_BURST) and by work:
  one for every JOBS_PER_FORK jobs of the queue that its slots finished (a batch
  acknowledged, or outcomes decided before a crash), up to CRASH_FORK_BANK (a queue that
  finished 5,000 jobs may replace 500 crashed slots as fast as they die: the retries of its
  poison jobs). A handler that crashes on every job finishes none: at most 20 forks a
  second per queue (a fork and a slot's start cost 12 ms of CPU on the 2-core test machine,
  measured by tests/master/test_crashes.py: a quarter of a core). One that crashes on 1% of
  its jobs earns ten forks per crash.
  A queue whose slots all died waits at most 1 / CRASH_FORKS_PER_S (50 ms) for its next
  fork; forks that are not replacements (start-up, a bigger slot map) never wait.
"""
from __future__ import annotations

from dataclasses import dataclass, field

CRASH_FORKS_PER_S = 20.0
CRASH_FORK_BURST = 20.0
JOBS_PER_FORK = 10
CRASH_FORK_BANK = 500.0


@dataclass(slots=True)
class BootBackoff:
    """After a failed start, the queue's next fork waits base_s, then twice that, ... up to max_s."""

    base_s: float = 0.5
    max_s: float = 60.0
    _failures: dict[str, int] = field(default_factory=dict)
    _not_before: dict[str, float] = field(default_factory=dict)

    def record_failed_start(self, queue: str, now: float) -> float:
        """Note one failed start; return how long the queue's next fork must wait."""
        failures = self._failures.get(queue, 0) + 1
        self._failures[queue] = failures
        delay_s = min(self.max_s, self.base_s * 2 ** (failures - 1))
        self._not_before[queue] = now + delay_s
        return delay_s

    def record_success(self, queue: str) -> None:
        self._failures.pop(queue, None)
        self._not_before.pop(queue, None)

    def ready(self, queue: str, now: float) -> bool:
        return now >= self._not_before.get(queue, float("-inf"))

    def failures(self, queue: str) -> int:
        return self._failures.get(queue, 0)

    def wait_s(self, queue: str, now: float) -> float:
        """How long the queue's next fork still waits (0.0: it may fork now)."""
        return max(0.0, self._not_before.get(queue, now) - now)


@dataclass(slots=True)
class ForkBudget:
    """Forks that replace crashed slots, per queue: a token bucket refilled at `per_s` a second
    up to `burst`, and by work (one per `jobs_per_fork` jobs finished) up to `bank`."""

    per_s: float = CRASH_FORKS_PER_S
    burst: float = CRASH_FORK_BURST
    jobs_per_fork: int = JOBS_PER_FORK
    bank: float = CRASH_FORK_BANK
    # queue -> crashed slots not replaced yet
    _owed: dict[str, int] = field(default_factory=dict)
    # queue -> (tokens, when they were counted)
    _tokens: dict[str, tuple[float, float]] = field(default_factory=dict)

    def crashed(self, queue: str) -> None:
        self._owed[queue] = self._owed.get(queue, 0) + 1

    def earn(self, queue: str, jobs: int, now: float) -> None:
        """The queue's slots finished `jobs` jobs alive."""
        tokens = self._refilled(queue, now)
        self._tokens[queue] = (min(self.bank, tokens + jobs / self.jobs_per_fork), now)

    def _refilled(self, queue: str, now: float) -> float:
        tokens, at = self._tokens.get(queue, (self.burst, now))
        if tokens >= self.burst:  # the clock refills up to the burst, work beyond it
            return tokens
        return min(self.burst, tokens + (now - at) * self.per_s)

    def may_fork(self, queue: str, now: float) -> bool:
        """True when the queue may fork now; a replacement takes a token."""
        owed = self._owed.get(queue, 0)
        if not owed:
            return True
        tokens = self._refilled(queue, now)
        if tokens < 1.0:
            self._tokens[queue] = (tokens, now)
            return False
        self._tokens[queue] = (tokens - 1.0, now)
        if owed == 1:
            del self._owed[queue]
        else:
            self._owed[queue] = owed - 1
        return True

    def owed(self, queue: str) -> int:
        return self._owed.get(queue, 0)
