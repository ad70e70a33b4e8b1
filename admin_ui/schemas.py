"""View models: what the pages render and the JSON API returns (pydantic, so /docs describes them)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Trend = Literal["up", "down", "steady"]
SortOrder = Literal["asc", "desc"]

# Columns of the queues table that ?sort= accepts (server side); the page sorts the same way.
QUEUE_SORT_KEYS = (
    "queue", "priority", "min_slots", "max_slots", "slots_current", "slots_avg", "slots_desired",
    "load", "waiting", "running", "delayed", "jobs_per_s", "mean_job_s", "errors",
)
QueueSortKey = Literal[
    "queue", "priority", "min_slots", "max_slots", "slots_current", "slots_avg", "slots_desired",
    "load", "waiting", "running", "delayed", "jobs_per_s", "mean_job_s", "errors",
]


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class OverrideView(_View):
    """An admin's runtime change, applied by the manager at its next plan."""

    paused: bool
    min_slots: int | None
    max_slots: int | None
    updated_at_unix: float


class QueueRow(_View):
    """One queue as of its latest planning interval."""

    queue: str
    at_unix: float
    priority: int
    min_slots: int
    max_slots: int
    slots_current: int
    slots_avg: float = Field(description="average slots over the manager's stats window")
    slots_desired: int
    load: float = Field(description="1.0 = 100%; above 1 when jobs pile up")
    trend: Trend = Field(description="up: the manager wants more slots, down: fewer")
    waiting: int
    running: int = Field(description="locked jobs (being processed)")
    delayed: int
    jobs_per_s: float
    mean_job_s: float
    errors: int
    paused: bool
    override: OverrideView | None = None


class QueueTotals(_View):
    slots_current: int
    slots_desired: int
    waiting: int
    running: int
    delayed: int
    jobs_per_s: float
    errors: int


class QueuesView(_View):
    at_unix: float | None = Field(description="time of the newest sample; None before any")
    age_s: float | None
    sort: QueueSortKey
    order: SortOrder
    queues: list[QueueRow]
    totals: QueueTotals
    unreported: list[str] = Field(description="configured queues with no sample yet")


class QueuePoint(_View):
    """One queue averaged over one chart bucket."""

    at_unix: float
    slots_current: float
    slots_avg: float
    slots_desired: float
    min_slots: float
    max_slots: float
    load: float
    waiting: float
    running: float
    delayed: float
    jobs_per_s: float
    mean_job_s: float
    errors: float


class QueueHistory(_View):
    queue: str
    since_unix: float
    until_unix: float
    bucket_s: float
    points: list[QueuePoint]


class HostSlots(_View):
    host: str
    slots: int


class EventView(_View):
    id: int
    at_unix: float
    kind: str
    queue: str | None
    host: str | None
    actor: str
    message: str
    detail: dict[str, object] | None


class QueueConfigView(_View):
    priority: int
    min_slots: int
    max_slots: int
    batch_size: int
    lock_timeout_s: float


class QueueDetail(_View):
    queue: str
    at_unix: float | None = Field(description="time of the queue's newest sample")
    age_s: float | None
    row: QueueRow | None
    config: QueueConfigView | None
    override: OverrideView | None
    hosts: list[HostSlots]
    events: list[EventView]


class HostRow(_View):
    """One host: its master's latest report and its part of the slot map."""

    host: str
    at_unix: float | None
    alive: bool
    reported: bool = Field(description="False when the slot map names a host with no report")
    capacity: int
    slots: int
    mem_total_bytes: int | None = Field(description="None while the master does not report it")
    mem_available_bytes: int
    master_pss_bytes: int
    slots_pss_bytes: int
    avg_slot_bytes: int
    load_avg_1m: float
    recycled_for_memory: int
    killed_hung: int
    by_queue: dict[str, int] = Field(description="slots per queue in the current slot map")
    mapped: int = Field(description="slots the slot map gives this host")


class SlotMapView(_View):
    at_unix: float | None = Field(description="time of the plan shown; None before any")
    age_s: float | None
    queues: list[str]
    hosts: list[HostRow]
    queue_totals: dict[str, int]
    total: int


class EventFilter(_View):
    kind: str | None = None
    queue: str | None = None
    host: str | None = None
    since_unix: float | None = None
    until_unix: float | None = None
    before_id: int | None = None
    limit: int = 200


class EventsView(_View):
    filter: EventFilter
    events: list[EventView]
    kinds: list[str]
    queues: list[str]
    hosts: list[str]
    older_before_id: int | None = Field(description="pass as before_id for the next page")


class LimitsChange(BaseModel):
    """New min/max slots for a queue; null clears the override (back to the config)."""

    model_config = ConfigDict(extra="forbid")
    min_slots: int | None = Field(default=None, ge=0, le=100_000)
    max_slots: int | None = Field(default=None, ge=0, le=100_000)


class ActionResult(_View):
    queue: str
    override: OverrideView | None
    event_id: int
    message: str


class Health(_View):
    ok: bool
    database: str
    latest_sample_unix: float | None
    read_only: bool
