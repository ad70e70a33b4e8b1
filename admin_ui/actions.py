"""Admin actions: an override of a queue (the manager applies it at its next plan) and an event each, through the manager's store."""
from __future__ import annotations

from dataclasses import replace

from admin_ui.errors import InvalidLimits, PulsarUnavailable, UnknownQueue
from admin_ui.limiters import LimiterReader
from admin_ui.schemas import ActionResult, LimitsChange
from admin_ui.views import override_view
from config.models import QueueConfig
from manager.storage.store import EventKind, NewEvent, Override, Store
from manager.storage.store_reads import QueueReading, StoreReads

ACTOR = "admin"


def _require_known(reads: StoreReads, queue: str, config: QueueConfig | None) -> QueueReading | None:
    sample = reads.latest_queue_sample(queue)
    if sample is None and config is None:
        raise UnknownQueue(f"no queue {queue!r} in the config or the manager's samples")
    return sample


def _current(reads: StoreReads, queue: str, now: float) -> Override:
    """The queue's override so far; a queue without one has none of the config's values replaced."""
    return reads.override(queue) or Override(queue=queue, paused=False, min_slots=None, max_slots=None,
                                             updated_at_unix=now)


def _record(
    store: Store, override: Override, *, kind: EventKind, message: str, now: float,
    detail: dict[str, object], actor: str,
) -> ActionResult:
    event = NewEvent(kind=kind, message=message, queue=override.queue, actor=actor, detail=detail)
    event_id = store.save_override(now, override, event)
    return ActionResult(queue=override.queue, event_id=event_id, message=message,
                        override=override_view(override))


def set_paused(
    store: Store, reads: StoreReads, queue: str, *, paused: bool, now: float,
    config: QueueConfig | None, client: str | None = None, actor: str = ACTOR,
) -> ActionResult:
    """Ask the manager to pause (no slots) or resume `queue`."""
    _require_known(reads, queue, config)
    before = _current(reads, queue, now)
    was = bool(before.paused)
    verb = "pause" if paused else "resume"
    return _record(
        store, replace(before, paused=paused, updated_at_unix=now),
        kind=EventKind.PAUSE_REQUESTED if paused else EventKind.RESUME_REQUESTED,
        message=f"{verb} of {queue} requested by {actor}"
        + ("" if was != paused else f" (already {'paused' if was else 'running'})"),
        now=now, detail={"paused": paused, "was_paused": was, "client": client}, actor=actor,
    )


def set_limits(
    store: Store, reads: StoreReads, queue: str, change: LimitsChange, *, now: float,
    config: QueueConfig | None, client: str | None = None, actor: str = ACTOR,
) -> ActionResult:
    """Override min/max slots of `queue` (None: back to the config value)."""
    sample = _require_known(reads, queue, config)
    if config is not None:
        base_min, base_max = config.min_slots, config.max_slots
    else:
        assert sample is not None  # _require_known
        base_min, base_max = sample.min_slots, sample.max_slots
    new_min = base_min if change.min_slots is None else change.min_slots
    new_max = base_max if change.max_slots is None else change.max_slots
    if new_min > new_max:
        raise InvalidLimits(f"min_slots {new_min} would be above max_slots {new_max}")
    before = _current(reads, queue, now)
    return _record(
        store, replace(before, min_slots=change.min_slots, max_slots=change.max_slots, updated_at_unix=now),
        kind=EventKind.LIMITS_CHANGED,
        message=f"slots of {queue} set to {new_min}..{new_max} by {actor}", actor=actor,
        now=now, detail={
            "min_slots": change.min_slots, "max_slots": change.max_slots,
            "effective_min_slots": new_min, "effective_max_slots": new_max,
            "previous": {"min_slots": before.min_slots, "max_slots": before.max_slots}, "client": client,
        },
    )


def resume_limiter(
    store: Store, reads: StoreReads, queue: str, *, limiters: LimiterReader | None, now: float,
    config: QueueConfig | None, client: str | None = None, actor: str = ACTOR,
) -> ActionResult:
    """Lift the pause of the queue's rate limiter at the pulsar (at once: no plan involved)."""
    if config is None or config.rate_limit is None:
        raise UnknownQueue(f"queue {queue!r} has no rate_limit, so no limiter to resume")
    if limiters is None:
        raise PulsarUnavailable("no pulsar is configured for the dashboard")
    refused = limiters.resume(queue)
    if refused is not None:
        raise PulsarUnavailable(f"the pulsar did not lift the pause of {queue!r}: {refused}")
    message = f"pause of the rate limiter {queue} lifted by {actor}"
    event_id = store.add_event(now, NewEvent(kind=EventKind.LIMITER_RESUMED, message=message, queue=queue,
                                             actor=actor, detail={"client": client}))
    stored = reads.override(queue)
    return ActionResult(queue=queue, event_id=event_id, message=message,
                        override=None if stored is None else override_view(stored))
