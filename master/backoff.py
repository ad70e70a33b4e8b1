"""Restart backoff per queue, so a handler that dies at start cannot fork-bomb the host (pure)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class BootBackoff:
    """After a failed start (a boot failure, or any unrequested death within `quick_death_s`),
    the queue's next fork waits base_s, then twice that, ... up to max_s. A slot that lives
    past `quick_death_s`, or exits cleanly, resets its queue."""

    quick_death_s: float = 5.0
    base_s: float = 0.5
    max_s: float = 60.0
    _failures: dict[str, int] = field(default_factory=dict)
    _not_before: dict[str, float] = field(default_factory=dict)

    def record_exit(self, queue: str, *, lived_s: float, failed: bool, boot_failure: bool, now: float) -> float:
        """Note one exit; return how long the queue's next fork must wait (0 for none)."""
        if boot_failure or (failed and lived_s < self.quick_death_s):
            failures = self._failures.get(queue, 0) + 1
            self._failures[queue] = failures
            delay_s = min(self.max_s, self.base_s * 2 ** (failures - 1))
            self._not_before[queue] = now + delay_s
            return delay_s
        self.record_success(queue)
        return 0.0

    def record_success(self, queue: str) -> None:
        self._failures.pop(queue, None)
        self._not_before.pop(queue, None)

    def ready(self, queue: str, now: float) -> bool:
        return now >= self._not_before.get(queue, float("-inf"))

    def failures(self, queue: str) -> int:
        return self._failures.get(queue, 0)
