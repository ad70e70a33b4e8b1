"""What a slot of a queue is told to do (pure): the queue's config and its handler class give batch size, locks, limits and retries."""
from __future__ import annotations

from collections.abc import Mapping

from config.bounded import MAX_NAME_CHARS
from config.models import ClusterConfig, QueueConfig
from master.report import QueueSettingsReport, cut
from slot.beacon import Assignment
from slot.handler import Handler
from slot.queue_settings import batch_size_in_force, batch_size_source


def assignment_for(config: ClusterConfig, handler: type[Handler], queue: str) -> Assignment:
    settings = config.queues.get(queue, QueueConfig())
    return Assignment(
        queue=queue,
        batch_size=batch_size_in_force(config.queues.get(queue), handler),
        lock_timeout_s=settings.lock_timeout_s,
        private_dirty_limit_bytes=settings.private_dirty_limit_bytes,
        max_attempts=settings.max_attempts,
        retry_base_s=settings.retry_base_s,
        retry_max_s=settings.retry_max_s,
        batch_timeout_s=handler.batch_timeout_s,
        max_result_bytes=config.queue_server.max_job_bytes,
        max_jobs_per_slot=settings.max_jobs_per_slot,
        max_jobs_per_slot_jitter=settings.max_jobs_per_slot_jitter,
        max_slot_age_s=settings.max_slot_age_s,
        max_slot_age_jitter_s=settings.max_slot_age_jitter_s,
    )


def queue_settings(
    config: ClusterConfig, handlers: Mapping[str, type[Handler]],
) -> dict[str, QueueSettingsReport]:
    """What `assignment_for` gives each handled queue's slots, and where it came from."""
    return {
        queue: QueueSettingsReport(
            batch_size=batch_size_in_force(config.queues.get(queue), handler),
            batch_size_source=batch_size_source(config.queues.get(queue)),
            handler=cut(f"{handler.__module__}.{handler.__qualname__}", MAX_NAME_CHARS),
        )
        for queue, handler in sorted(handlers.items())
    }
