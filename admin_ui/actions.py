"""Admin actions: write QueueOverride rows (the manager applies them at its next plan) and an Event each."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from admin_ui.errors import InvalidLimits, UnknownQueue
from admin_ui.schemas import ActionResult, LimitsChange, OverrideView
from config.models import QueueConfig
from manager.db import Event, QueueOverride, QueueSample

ACTOR = "admin"
PAUSE_REQUESTED = "pause_requested"
RESUME_REQUESTED = "resume_requested"
LIMITS_CHANGED = "limits_changed"


def _latest_sample(session: Session, queue: str) -> QueueSample | None:
    return session.scalars(
        select(QueueSample).where(QueueSample.queue == queue)
        .order_by(QueueSample.at_unix.desc(), QueueSample.id.desc()).limit(1)
    ).first()


def _require_known(session: Session, queue: str, config: QueueConfig | None) -> QueueSample | None:
    sample = _latest_sample(session, queue)
    if sample is None and config is None:
        raise UnknownQueue(f"no queue {queue!r} in the config or the manager's samples")
    return sample


def _override_row(session: Session, queue: str, now: float) -> QueueOverride:
    row = session.get(QueueOverride, queue)
    if row is None:
        row = QueueOverride(queue=queue, paused=False, min_slots=None, max_slots=None,
                            updated_at_unix=now)
        session.add(row)
    return row


def _record(
    session: Session, row: QueueOverride, *, kind: str, message: str, now: float,
    detail: dict[str, object],
) -> ActionResult:
    event = Event(at_unix=now, kind=kind, queue=row.queue, host=None, actor=ACTOR,
                  message=message, detail=detail)
    session.add(event)
    session.commit()
    return ActionResult(
        queue=row.queue, event_id=event.id, message=message,
        override=OverrideView(paused=row.paused, min_slots=row.min_slots, max_slots=row.max_slots,
                              updated_at_unix=row.updated_at_unix),
    )


def set_paused(
    session: Session, queue: str, *, paused: bool, now: float, config: QueueConfig | None,
    client: str | None = None,
) -> ActionResult:
    """Ask the manager to pause (no slots) or resume `queue`; commits."""
    _require_known(session, queue, config)
    row = _override_row(session, queue, now)
    was = bool(row.paused)
    row.paused = paused
    row.updated_at_unix = now
    verb = "pause" if paused else "resume"
    return _record(
        session, row, kind=PAUSE_REQUESTED if paused else RESUME_REQUESTED,
        message=f"{verb} of {queue} requested by {ACTOR}"
        + ("" if was != paused else f" (already {'paused' if was else 'running'})"),
        now=now, detail={"paused": paused, "was_paused": was, "client": client},
    )


def set_limits(
    session: Session, queue: str, change: LimitsChange, *, now: float, config: QueueConfig | None,
    client: str | None = None,
) -> ActionResult:
    """Override min/max slots of `queue` (None: back to the config value); commits."""
    sample = _require_known(session, queue, config)
    if config is not None:
        base_min, base_max = config.min_slots, config.max_slots
    else:
        assert sample is not None  # _require_known
        base_min, base_max = sample.min_slots, sample.max_slots
    new_min = base_min if change.min_slots is None else change.min_slots
    new_max = base_max if change.max_slots is None else change.max_slots
    if new_min > new_max:
        raise InvalidLimits(f"min_slots {new_min} would be above max_slots {new_max}")
    row = _override_row(session, queue, now)
    before = {"min_slots": row.min_slots, "max_slots": row.max_slots}
    row.min_slots = change.min_slots
    row.max_slots = change.max_slots
    row.updated_at_unix = now
    return _record(
        session, row, kind=LIMITS_CHANGED,
        message=f"slots of {queue} set to {new_min}..{new_max} by {ACTOR}",
        now=now, detail={
            "min_slots": change.min_slots, "max_slots": change.max_slots,
            "effective_min_slots": new_min, "effective_max_slots": new_max,
            "previous": before, "client": client,
        },
    )
