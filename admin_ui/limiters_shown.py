"""The limiters the dashboard shows: the configured rate-limited queues, read through the
settings' LimiterReader (apart from limiters.py, which settings.py imports)."""
from __future__ import annotations

from admin_ui.limiters import limiter_status
from admin_ui.schemas import LimiterStatus
from admin_ui.settings import AdminSettings


def queue_limiter(settings: AdminSettings, queue: str) -> LimiterStatus | None:
    """The queue's limiter figures; the pulsar is asked only for a queue with a rate_limit."""
    config = settings.queues.get(queue)
    if config is None or config.rate_limit is None:
        return None
    return limiter_status(queue, config, None if settings.limiters is None else settings.limiters.read())


def queue_limiters(settings: AdminSettings) -> dict[str, LimiterStatus]:
    """Every rate-limited queue's limiter from one read of the pulsar (none asked without one)."""
    rated = {name: config for name, config in settings.queues.items() if config.rate_limit is not None}
    if not rated:
        return {}
    readout = None if settings.limiters is None else settings.limiters.read()
    found = {name: limiter_status(name, config, readout) for name, config in rated.items()}
    return {name: status for name, status in found.items() if status is not None}
