"""HostReport: what a master tells the manager (and its report file) about the host and its slots."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from config.bounded import (
    MAX_LOAD,
    MAX_NAME_CHARS,
    MAX_QUEUES,
    MAX_SLOTS,
    MAX_TEXT_CHARS,
    Count,
    HostName,
    Load,
    Name,
    Pid,
    QueueName,
    Seconds,
    SlotNumber,
    Text,
    UnixTime,
)
from config.frames import Frame
from master.capacity import Capacity, capped_by_load
from master.crashes import MAX_RECENT, CrashCounts, CrashLog, SlotCrash
from master.host import HostFigures
from master.lifecycle import Counter, Slot, SlotState
from master.start_failures import MAX_REPORTED, StartFailure
from slot.beacon import SlotPhase


class ReportError(ValueError):
    """A report frame that does not decode."""


class _Model(Frame):
    DECODE_ERROR = ReportError


class SlotReport(_Model):
    slot_id: SlotNumber
    pid: Pid
    state: SlotState
    # What the slot last said it was doing (None before its first beacon).
    phase: SlotPhase | None
    queue: QueueName
    # The queue the master wants it on; differs from `queue` while a retarget is under way.
    assigned_queue: QueueName
    uptime_s: Seconds
    jobs_done: Count = 0
    jobs_later: Count = 0
    jobs_failed: Count = 0
    jobs_dead: Count = 0
    batches: Count = 0
    errors: Count = 0
    busy_s: Seconds = 0.0
    pss_bytes: Count = 0
    private_dirty_bytes: Count = 0
    # The batch size the slot was told to use (its assignment); 0 in reports of older masters.
    batch_size: Count = 0


class QueueSettingsReport(_Model):
    """A handled queue's settings in force on this host (slot/queue_settings.py's rule)."""

    batch_size: Count
    # "config": the queue's config table wrote batch_size; "handler": the handler class's.
    batch_size_source: Literal["config", "handler"]
    handler: Name


class HostReport(_Model):
    """Every field bounded (config/bounded.py): the manager takes these from any peer."""

    # Sent only when not empty: a manager of the release before reads the rest.
    LATER_FIELDS = frozenset({"crashes", "crash_counts", "load_limit", "code_version",
                              "code_generation", "code_reloading", "code_reload_failure",
                              "code_reloads_answered", "queues_version",
                              "recycled_for_jobs", "recycled_for_age", "start_failures"})

    host: HostName
    master_pid: Pid
    sent_at_unix: UnixTime
    capacity: Count
    capacity_by_memory: Count
    capacity_by_load: Count
    max_slots: Count
    avg_slot_bytes: Count
    # The figures `capacity` was computed from (one measurement, every second).
    master_pss_bytes: Count
    slots_pss_bytes: Count
    slots_measured: Count
    mem_available_bytes: Count
    mem_total_bytes: Count = 0
    load_avg_1m: Load
    cpus: Count
    # max_load_per_cpu x cpus: above it `capacity_by_load` bounds the host (0: from an older master).
    load_limit: Load = 0.0
    slots: list[SlotReport] = Field(max_length=MAX_SLOTS)
    # Without RECYCLED_FOR_JOBS and RECYCLED_FOR_AGE: a manager of the release before validates
    # these keys as a closed set, so they go in the two fields below, sent once not 0.
    counters: dict[Counter, Count] = Field(default_factory=dict)
    # Handler sources that failed to import -> why; their queues get no slots.
    handler_failures: dict[Name, Text] = Field(default_factory=dict, max_length=MAX_QUEUES)
    # Queues the slot map names but no loaded handler serves.
    unhandled_queues: list[QueueName] = Field(default_factory=list, max_length=MAX_QUEUES)
    # Each queue this host has a handler for -> the settings its slots get.
    queue_settings: dict[QueueName, QueueSettingsReport] = Field(default_factory=dict, max_length=MAX_QUEUES)
    # The latest slot crashes (master/crashes.py), and all of them by queue and cause.
    crashes: list[SlotCrash] = Field(default_factory=list, max_length=MAX_RECENT)
    crash_counts: dict[QueueName, CrashCounts] = Field(default_factory=dict, max_length=MAX_QUEUES)
    # The handler code's version (master/code_reload.py: a hash of the app's modules; "" with
    # none), how many code reloads took, whether one rolls now, and the last one refused.
    code_version: Name = ""
    code_generation: Count = 0
    code_reloading: bool = False
    code_reload_failure: Text | None = None
    # Reloads asked and finished (rolled, refused or code unchanged): `slotmap reload` waits for it.
    code_reloads_answered: Count = 0
    # The version of the queue settings the manager sent that this host runs ("": its own file's).
    queues_version: Name = ""
    # Slots that left after max_jobs_per_slot or max_slot_age_s, since the master started.
    recycled_for_jobs: Count = 0
    recycled_for_age: Count = 0
    # Why queues' slots do not come up: the last setup() error of each queue, the handler
    # modules that failed to import, newest first (master/start_failures.py).
    start_failures: list[StartFailure] = Field(default_factory=list, max_length=MAX_REPORTED)

    def load_cap(self) -> str | None:
        """The notice while the load bound, not memory or max_slots, sets the capacity (the
        manager's event and the dashboard's host row); None too from a master too old to
        send its limit."""
        if not self.load_limit or not capped_by_load(
            by_load=self.capacity_by_load, by_memory=self.capacity_by_memory, max_slots=self.max_slots,
        ):
            return None
        return (f"capped by load: {self.capacity} of {min(self.capacity_by_memory, self.max_slots)} "
                f"slots (load {self.load_avg_1m:.2f} on {self.cpus} CPUs, limit {self.load_limit:g})")


@dataclass(frozen=True, slots=True)
class CodeState:
    """The handler code's part of a report (master/reloading.py)."""

    version: str
    generation: int
    reloading: bool
    failure: str | None
    answered: int = 0


def cut(text: str, limit: int) -> str:
    """User code's words (an import error, a class path) within the report's bound: the
    manager refuses a longer one, and the whole report with it."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


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
    crash_log: CrashLog | None = None,
    code: CodeState | None = None,
    start_failures: Sequence[StartFailure] = (),
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
        # A max_load_per_cpu set huge to turn the bound off must not make the report invalid.
        load_limit=min(capacity.load_limit, MAX_LOAD),
        slots=reports,
        counters={counter: n for counter, n in counters.items() if counter not in _OWN_FIELDS},
        recycled_for_jobs=counters.get(Counter.RECYCLED_FOR_JOBS, 0),
        recycled_for_age=counters.get(Counter.RECYCLED_FOR_AGE, 0),
        handler_failures={cut(source, MAX_NAME_CHARS): cut(why, MAX_TEXT_CHARS)
                          for source, why in handler_failures.items()},
        unhandled_queues=list(unhandled_queues),
        queue_settings=dict(queue_settings or {}),
        crashes=list(crash_log.recent) if crash_log else [],
        crash_counts={q: dict(c) for q, c in crash_log.counts.items()} if crash_log else {},
        code_version=code.version if code else "",
        code_generation=code.generation if code else 0,
        code_reloading=code.reloading if code else False,
        code_reload_failure=cut(code.failure, MAX_TEXT_CHARS) if code and code.failure else None,
        code_reloads_answered=code.answered if code else 0,
        start_failures=list(start_failures),
    )


# Counters the report sends in fields of their own (see HostReport.counters).
_OWN_FIELDS = frozenset({Counter.RECYCLED_FOR_JOBS, Counter.RECYCLED_FOR_AGE})
