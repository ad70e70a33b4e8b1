"""View models: what the pages render and the JSON API returns (pydantic, so /docs describes them)."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from admin_ui.start_failures import StartFailureView

Trend = Literal["up", "down", "steady"]
SortOrder = Literal["asc", "desc"]

# Columns of the queues table that ?sort= accepts (server side); the page sorts the same way.
QUEUE_SORT_KEYS = (
    "queue", "priority", "min_slots", "max_slots", "slots_current", "slots_avg", "slots_desired",
    "load", "waiting", "running", "delayed", "jobs_per_s", "mean_job_s", "errors",
)
QueueSortKey = Literal[
    "queue", "priority", "min_slots", "max_slots", "slots_current", "slots_avg", "slots_desired",
    "load", "waiting", "running", "delayed", "jobs_per_s", "mean_job_s", "errors", "failed", "dead",
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
    delayed: int = Field(description="delayed jobs not ready before their time, failed ones not counted (they are in failed)")
    jobs_per_s: float
    mean_job_s: float
    errors: int = Field(description="failed attempts in the interval (the queue server's count)")
    failed: int = Field(default=0, description="failed jobs waiting for their retry now (not counted in delayed)")
    dead: int = Field(default=0, description="dead jobs kept now: out of attempts; retry or delete them")
    configured: bool = Field(default=True, description="False: no config names the queue, so no slot serves it")
    handled: bool | None = Field(
        default=None, description="whether some live master has the queue's handler (None: not known)")
    unhandled: bool = Field(
        default=False, description="it holds jobs that no slot can take: not configured, or no live "
                                   "master has its handler")
    paused: bool
    override: OverrideView | None = None
    batch_size: int | None = Field(
        default=None, description="the batch size the slots use (None: no master has the queue's handler)")
    batch_size_source: Literal["config", "handler"] | None = Field(
        default=None, description="config: written in [queues.<q>]; handler: the handler class's batch_size")
    limiter: LimiterStatus | None = Field(default=None, description="None: the queue has no rate_limit")
    slots_live: bool = Field(
        default=False, description="True: slots_current is what the masters report running now (the "
                                    "manager's live counts); False: the count of the last plan's sample")
    slots_age_s: float | None = Field(
        default=None, description="how old slots_current is: since the masters' reports behind the live "
                                  "count, or since the sample")


class QueueTotals(_View):
    slots_current: int
    slots_desired: int
    waiting: int
    running: int
    delayed: int = Field(description="delayed jobs not ready before their time, failed ones not counted (they are in failed)")
    jobs_per_s: float
    errors: int
    failed: int = Field(default=0, description="failed jobs waiting for their retry, all queues")
    dead: int = Field(default=0, description="dead jobs kept, all queues")


class QueuesView(_View):
    at_unix: float | None = Field(description="time of the newest sample; None before any")
    age_s: float | None
    slots_age_s: float | None = Field(
        default=None, description="how old the oldest row's slots_current is (live counts: well under a "
                                  "second plus the masters' heartbeat; samples: since the plan)")
    sort: QueueSortKey
    order: SortOrder
    queues: list[QueueRow]
    totals: QueueTotals
    unreported: list[str] = Field(description="configured queues with no sample yet")
    unhandled: list[str] = Field(
        default_factory=list,
        description="queues that hold jobs but that no slot can serve: no config names them, or no "
                    "live master has their handler")


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
    count: int = Field(default=1, description="grouped rows: the failures they count together")
    grouped: int = Field(default=1, description="how many stored events this row stands for")
    first_at_unix: float | None = Field(default=None, description="grouped rows: the oldest event's time")


class QueueConfigView(_View):
    priority: int
    min_slots: int
    max_slots: int
    batch_size: int | None = Field(
        description="batch_size as written in the config (None: left out, the handler class's is "
                    "in force); the value the slots use is the row's batch_size")
    lock_timeout_s: float


class LimiterStatus(_View):
    """A rate-limited queue's cluster-wide limiter, as the pulsar reports it now."""

    name: str = Field(description="the limiter's name: the queue's")
    configured_per_s: float = Field(description="the config's rate_limit, permits per second")
    reachable: bool = Field(description="False: the pulsar did not answer; the figures are None")
    error: str | None = None
    pulsar_configured_per_s: float | None = Field(default=None, description="the rate the pulsar was started with")
    current_per_s: float | None = Field(default=None, description="the rate in force (lower after cuts)")
    granted_total: int | None = Field(default=None, description="permits granted since the pulsar started")
    cuts: int | None = Field(default=None, description="times a handler's slow_down() cut the rate")
    pauses: int | None = Field(default=None, description="times a handler paused the limiter")
    paused_for_s: float | None = Field(default=None, description="seconds the pause in force still lasts")


class QueueDetail(_View):
    queue: str
    at_unix: float | None = Field(description="time of the queue's newest sample")
    age_s: float | None
    row: QueueRow | None
    config: QueueConfigView | None
    override: OverrideView | None
    limiter: LimiterStatus | None = Field(default=None, description="None: the queue has no rate_limit")
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
    recycled_for_jobs: int = Field(default=0, description="slots that left after max_jobs_per_slot, "
                                   "since the master started")
    recycled_for_age: int = Field(default=0, description="slots that left past max_slot_age_s, "
                                  "since the master started")
    killed_hung: int
    load_cap: str | None = Field(default=None, description="\"capped by load: ...\" while the "
                                 "load average, not memory, sets the host's capacity")
    code_version: str | None = Field(default=None, description="hash of the master's handler "
                                     "code (hosts differ during a rolling deploy)")
    code_reload_failure: str | None = Field(default=None, description="the master's last refused "
                                            "code reload, until one succeeds")
    other_code: bool = Field(default=False, description="this host's code version differs from "
                             "the one most live hosts run")
    start_failures: list[StartFailureView] = Field(default_factory=list)
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
    group: bool = False


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


# Jobs on the queue server (issue 9): lists by state, one job, retry and delete.

JobState = Literal["failed", "dead", "ready", "delayed", "running", "done"]
JOB_STATES: tuple[JobState, ...] = ("failed", "dead", "ready", "delayed", "running", "done")
# The queue server's key syntax (docs/PROTOCOL.md Part B).
JOB_KEY_PATTERN = r"^[A-Za-z0-9_.:@-]{1,128}$"
MAX_JOB_KEYS = 1000


class JobErrorView(_View):
    """One failed attempt of a job."""

    at: float = Field(description="unix time of the failure")
    attempt: int = Field(description="the run that failed (1 = the first; a retry of a dead job starts again)")
    error: str = Field(description="the error; earlier ones than the last are cut to their last 2 KiB")
    error_summary: str | None = Field(description="its last line")


class JobView(_View):
    """One job as the queue server's JOB/JOBS describe it."""

    key: str
    queue: str
    state: str = Field(description="ready, delayed, failed (waiting for a retry), running, dead or done (finished, kept keep_done_s)")
    priority: int
    attempts: int = Field(description="hand-outs so far (a LATER gives one back; a retry of a dead job resets)")
    error: str | None = Field(description="the last failure's text (a traceback for handler exceptions)")
    error_summary: str | None = Field(description="the error's last line, e.g. 'ValueError: bad photo'")
    failed_at: float | None
    next_run_at: float | None = Field(description="delayed and failed jobs: when they are ready again")
    died_at: float | None
    lease_id: int | None = Field(description="running jobs: the sockPQd job id of this hand-out")
    expires_at: float | None = Field(default=None, description="a job put with a TTL and not taken yet: when it is deleted")
    trace: str | None = Field(default=None, description="the W3C traceparent its producer put it with (docs/GUIDE.md \"Tracing\")")
    item: str | None
    data_len: int
    data: str = Field(description="UTF-8 text, invalid bytes replaced; lists cut it at 1 KiB")
    data_truncated: bool = False
    errors: list[JobErrorView] | None = Field(
        default=None, description="one job only (not lists): the errors of its last failed attempts, "
                                  "oldest first (errors_kept per queue, default 5)")
    started_at: float | None = Field(default=None, description="running and done jobs: when it was handed out")
    running_by: str | None = Field(default=None, description="running jobs: the CLIENT NAME of the connection it was handed to (a slot: slot.<host>.<slot id>; null: unnamed)")
    running_host: str | None = Field(default=None, description="running jobs on a slot: its host")
    running_slot: int | None = Field(default=None, description="running jobs on a slot: its slot id on that host")
    done_at: float | None = Field(default=None, description="done jobs: when it finished")
    runtime_s: float | None = Field(default=None, description="done jobs: done_at - started_at")
    ran_by: str | None = Field(default=None, description="done jobs: the connection that finished it (a slot: slot.<host>.<slot id>)")
    result: str | None = Field(default=None, description="done jobs: what the handler returned (UTF-8; lists cut it at 1 KiB)")
    result_len: int | None = None
    result_kept: bool = Field(default=True, description="False: its result was over max_result_bytes, not kept")
    result_truncated: bool = False


class JobCounts(_View):
    """How many jobs of the queue are in each state, each as many as its list shows (STATS counts
    failed jobs among the delayed ones; here they are in failed only)."""

    ready: int
    delayed: int
    failed: int
    running: int
    dead: int
    done: int = Field(default=0, description="finished jobs kept (keep_done_s, keep_done_max)")


class JobsView(_View):
    queue: str
    state: JobState
    limit: int
    jobs: list[JobView]
    counts: JobCounts | None = Field(description="None when the queue server does not know the queue")
    next_after: str | None = Field(description="pass as `after` for the next page; None at the end")
    next_at: str | None = Field(default=None, description=(
        "pass as `at` with `after`: the last job's position, so the next page goes on past it "
        "even when that job left the state meanwhile"))


class JobsAction(BaseModel):
    """Either `keys` (one or more jobs of the queue) or `all` (every dead, or every failed, job)."""

    model_config = ConfigDict(extra="forbid")
    keys: list[Annotated[str, Field(pattern=JOB_KEY_PATTERN)]] = Field(
        default_factory=list, max_length=MAX_JOB_KEYS)
    all: Literal["dead", "failed"] | None = None


class JobsActionResult(_View):
    queue: str
    action: Literal["retry", "delete", "cancel"]
    results: dict[str, str] = Field(description="per key: ok, not_found or running (delete refuses running jobs); cancel: removed or cancelled")
    count: int = Field(description="jobs retried or deleted")
    event_id: int
    message: str


class ScheduleView(_View):
    """A periodic job as /api/schedules and the Schedules page show it."""

    name: str
    queue: str
    rule: str
    catch_up: str
    enabled: bool
    paused: bool
    next_fire_unix: float | None
    last_job_key: str | None
    last_fired_at_unix: float | None
    last_job_state: str | None
    run_requested: bool
    # Where the config file the dashboard read differs from what the active manager fires.
    manager_differs: str = ""


class ConfigReloadAsked(_View):
    request_id: int
    message: str


class ScheduleAction(_View):
    schedule: str
    message: str
