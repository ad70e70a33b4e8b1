"""HostReport: what a master tells the manager (and its report file) about the host and its slots."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import Field

from config.frames import Frame
from master.capacity import Capacity
from master.host import HostFigures
from master.lifecycle import Counter, Slot, SlotState
from slot.beacon import SlotPhase


class ReportError(ValueError):
    """A report frame that does not decode."""


class _Model(Frame):
    DECODE_ERROR = ReportError


class SlotReport(_Model):
    slot_id: int
    pid: int
    state: SlotState
    # What the slot last said it was doing (None before its first beacon).
    phase: SlotPhase | None
    queue: str
    # The queue the master wants it on; differs from `queue` while a retarget is under way.
    assigned_queue: str
    uptime_s: float
    jobs_done: int = 0
    jobs_later: int = 0
    jobs_failed: int = 0
    jobs_dead: int = 0
    batches: int = 0
    errors: int = 0
    busy_s: float = 0.0
    pss_bytes: int = 0
    private_dirty_bytes: int = 0
    # The batch size the slot was told to use (its assignment); 0 in reports of older masters.
    batch_size: int = 0


class QueueSettingsReport(_Model):
    """A handled queue's settings in force on this host (slot/queue_settings.py's rule)."""

    batch_size: int
    # "config": the queue's config table wrote batch_size; "handler": the handler class's.
    batch_size_source: Literal["config", "handler"]
    handler: str


class HostReport(_Model):
    host: str
    master_pid: int
    sent_at_unix: float
    capacity: int
    capacity_by_memory: int
    capacity_by_load: int
    max_slots: int
    avg_slot_bytes: int
    # The figures `capacity` was computed from (one measurement, every second).
    master_pss_bytes: int
    slots_pss_bytes: int
    slots_measured: int
    mem_available_bytes: int
    mem_total_bytes: int = 0
    load_avg_1m: float
    cpus: int
    slots: list[SlotReport]
    counters: dict[Counter, int] = Field(default_factory=dict)
    # Handler sources that failed to import -> why; their queues get no slots.
    handler_failures: dict[str, str] = Field(default_factory=dict)
    # Queues the slot map names but no loaded handler serves.
    unhandled_queues: list[str] = Field(default_factory=list)
    # Each queue this host has a handler for -> the settings its slots get.
    queue_settings: dict[str, QueueSettingsReport] = Field(default_factory=dict)


def slot_report(slot: Slot, now: float) -> SlotReport:
    beacon = slot.beacon
    return SlotReport(
        slot_id=slot.slot_id,
        pid=slot.pid,
        state=slot.state,
        phase=beacon.phase if beacon else None,
        queue=slot.queue,
        assigned_queue=slot.assignment.queue,
        uptime_s=round(now - slot.started_at, 3),
        jobs_done=beacon.jobs_done if beacon else 0,
        jobs_later=beacon.jobs_later if beacon else 0,
        jobs_failed=beacon.jobs_failed if beacon else 0,
        jobs_dead=beacon.jobs_dead if beacon else 0,
        batches=beacon.batches if beacon else 0,
        errors=beacon.errors if beacon else 0,
        busy_s=beacon.busy_s if beacon else 0.0,
        pss_bytes=beacon.pss_bytes if beacon else 0,
        private_dirty_bytes=beacon.private_dirty_bytes if beacon else 0,
        batch_size=slot.assignment.batch_size,
    )


def build_report(
    *,
    host: str,
    master_pid: int,
    sent_at_unix: float,
    now: float,
    capacity: Capacity,
    figures: HostFigures,
    slots: Iterable[Slot],
    counters: Mapping[Counter, int],
    handler_failures: Mapping[str, str],
    unhandled_queues: Iterable[str],
    queue_settings: Mapping[str, QueueSettingsReport] | None = None,
) -> HostReport:
    reports = [slot_report(slot, now) for slot in sorted(slots, key=lambda s: s.slot_id)]
    return HostReport(
        host=host,
        master_pid=master_pid,
        sent_at_unix=sent_at_unix,
        capacity=capacity.slots,
        capacity_by_memory=capacity.by_memory,
        capacity_by_load=capacity.by_load,
        max_slots=capacity.max_slots,
        avg_slot_bytes=capacity.avg_slot_bytes,
        master_pss_bytes=figures.master_pss_bytes,
        slots_pss_bytes=sum(figures.slots_pss_bytes),
        slots_measured=len(figures.slots_pss_bytes),
        mem_available_bytes=figures.mem_available_bytes,
        mem_total_bytes=figures.mem_total_bytes,
        load_avg_1m=figures.load_avg_1m,
        cpus=figures.cpus,
        slots=reports,
        counters=dict(counters),
        handler_failures=dict(handler_failures),
        unhandled_queues=list(unhandled_queues),
        queue_settings=dict(queue_settings or {}),
    )
