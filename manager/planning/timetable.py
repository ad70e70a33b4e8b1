"""When each of the manager loop's periodic duties is due next (manager/service.py reads and sets it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Schedule:
    """When each periodic duty is due next (monotonic seconds)."""

    first_plan_at: float
    plan_at: float
    # Until the first plan: hosts alive in the last stored history, and how long to wait
    # for them (masters in reconnect backoff come back within liveness + 32 intervals).
    expected_hosts: frozenset[str] = frozenset()
    expected_until: float = float("-inf")
    heartbeat_at: float = float("-inf")
    burst_check_at: float = float("-inf")
    lease_check_at: float = float("-inf")
    prune_at: float = float("-inf")
    last_plan_at: float | None = None
