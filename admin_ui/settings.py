"""What the dashboard needs to know besides the database: access, refresh and the configured queues."""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from config.models import ClusterConfig, QueueConfig


@dataclass(frozen=True, slots=True)
class AdminSettings:
    # None: nobody can change anything (read-only dashboard).
    token: str | None = None
    # True: reading pages, the API and /metrics needs the token too.
    protect_reads: bool = False
    refresh_s: float = 5.0
    plan_interval_s: float = 5.0
    target_load: float = 0.8
    queues: Mapping[str, QueueConfig] = field(default_factory=dict)
    clock: Callable[[], float] = time.time

    @property
    def forget_after_s(self) -> float:
        """A queue or host not reported for this long is no longer shown as current."""
        return max(60.0, 12 * self.plan_interval_s)

    @classmethod
    def from_config(
        cls, config: ClusterConfig, *, token: str | None = None, protect_reads: bool = False,
        refresh_s: float = 5.0,
    ) -> AdminSettings:
        return cls(
            token=token if token is not None else config.admin.token,
            protect_reads=protect_reads,
            refresh_s=refresh_s,
            plan_interval_s=config.manager.plan_interval_s,
            target_load=config.manager.target_load,
            queues=dict(config.queues),
        )
