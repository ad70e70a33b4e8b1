"""Pydantic models of the cluster config (TOML): one section per part of the platform."""
from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from config.admin_config import AdminConfig
from config.bounded import MAX_SECONDS
from config.endpoints import check_token, parse_host_port, parse_zmq_endpoint
from config.names import HOST_NAME_PATTERN, QUEUE_NAME_PATTERN
from config.recycling import (
    MAX_JOBS_PER_SLOT,
    MAX_JOBS_PER_SLOT_JITTER,
    MAX_SLOT_AGE_JITTER_S,
    MAX_SLOT_AGE_S,
    check_recycling,
)
from config.schedules import SCHEDULE_NAME_PATTERN, ScheduleConfig


class _Strict(BaseModel):
    # strict: a TOML value of the wrong type is an error naming its key, never coerced
    # (`every_s = true` ran a schedule every second, `max_slots = true` was 1, `"30"` was 30).
    # An integer is still taken where a number (float) is expected: `every_s = 5`.
    model_config = ConfigDict(extra="forbid", strict=True)


def _zmq_endpoint(value: str) -> str:
    parse_zmq_endpoint(value)
    return value


# The largest master report is about this many bytes per slot (queue names of 128
# characters, every counter at 10^12: 550 bytes measured) plus the report's own fields.
REPORT_BYTES_PER_SLOT = 600
REPORT_OVERHEAD_BYTES = 64 * 1024


class QueueServerConfig(_Strict):
    listen: str = Field(default="127.0.0.1:7400", description="HOST:PORT the queue server listens on (127.0.0.1 unless told otherwise).")
    data_dir: str = Field(default="./var/queue", description="Folder of the snapshot and log files (relative paths: to the folder the server starts in).")
    fsync: Literal["always", "everysec", "never"] = Field(default="always", description="always: a PUT is acknowledged only once its record is on disk (group commit); everysec / never trade that for speed.")
    expire_action: Literal["later", "done"] = Field(default="later", description="What happens to a job whose lock expires without THEN: later puts it back, done deletes it (-d).")
    token: str | None = Field(default=None, repr=False, description="When set, every client must send AUTH <token> first (slots, manager and CLI take it from here).")
    max_job_bytes: int = Field(default=1024 * 1024, ge=1, description="Largest job data accepted; a bigger block gets 413 and the connection is closed.")
    snapshot_log_bytes: int = Field(default=256 * 1024 * 1024, ge=4096, description="A snapshot is written (in a forked child) when the log grows past this.")
    # Default lock time for jobs handed out without EXPIRE, per queue (over [queues.*].lock_timeout_s).
    lock_timeouts_s: dict[str, float] = Field(default_factory=dict, description="Queue -> lock time for jobs handed out without EXPIRE; overrides [queues.<q>].lock_timeout_s for the server. Each > 0 and <= 10000000000 (the bound of EXPIRE).")
    servers: list[str] = Field(default_factory=list, description="Every queue server of the cluster (HOST:PORT) for clients (slots, manager, producers); empty: listen alone.")
    # Follow this primary (HOST:PORT) as a replica; promoted after promote_after_s without it.
    replica_of: str | None = Field(default=None, description="Follow this primary (HOST:PORT) as a replica; promoted after promote_after_s without it.")
    promote_after_s: float = Field(default=1.5, gt=0, le=3600, description="A replica goes online after this long without hearing from its primary (with managed_failover: the manager promotes one then, once the old primary's lease is surely over).")
    managed_failover: bool = Field(default=False, description="The active manager decides which queue server is primary, through the cluster database (epoch, lease, promotion of an in-sync replica; docs/DESIGN.md \"Failover that loses nothing\"); servers acknowledge nothing without its lease.")
    lease_s: float = Field(default=1.25, gt=0, le=60, description="managed_failover: how long a primary may acknowledge, counted from its reply to the manager's renewal before the last (renewals every 0.25 s); shorter than promote_after_s. The manager's value counts (it sends it in each LEASE); a server's is not used.")
    # The cluster's servers asked at start (queue_server/server/join.py): if any answers, this one
    # becomes a replica of the lowest id with the highest id + 1.
    join: list[str] = Field(default_factory=list, description="Queue servers asked at start (HOST:PORT): if any answers, this one becomes a replica of the lowest id with the highest id + 1.")
    # A replica whose unread stream passes this is cut off and must resync from a snapshot.
    replica_backlog_bytes: int = Field(default=256 * 1024 * 1024, ge=1, description="A replica whose unread replication stream passes this is cut off and must resync from a snapshot.")
    replicate: Literal["async", "sync"] = Field(default="async", description="sync: every change is acknowledged only once min_sync_replicas replicas wrote it (under their fsync policy) and confirmed it; async: replicas follow behind (docs/DESIGN.md, \"Failover that loses nothing\"). Each server enforces its own; with managed_failover the manager judges a promotion by what the primary reports in ROLE, and a manager's value that differs is reported (event queue_settings_mismatch), not used.")
    min_sync_replicas: int = Field(default=1, ge=1, le=16, description="replicate = \"sync\": replicas that must confirm a change before it is acknowledged. Each server enforces its own; with managed_failover the manager judges a promotion by the primary's (ROLE), and servers that differ, or differ from the manager's value, are reported (event queue_settings_mismatch).")
    sync_timeout_s: float = Field(default=2.0, gt=0, le=3600, description="replicate = \"sync\": with no confirmation for this long, the primary refuses queue commands (500 Offline Mode) or, with sync_fallback = \"async\", goes on alone.")
    sync_fallback: Literal["refuse", "async"] = Field(default="refuse", description="replicate = \"sync\" and no replica confirms: refuse (acknowledge nothing more until one does) or async (go on alone, logged and shown in ROLE and /metrics; with managed_failover only once the manager recorded that no replica is in sync, after which it promotes none).")
    token_file: str | None = Field(default=None, description="A file whose first line is the token (instead of token; chmod 600). $SLOTMAP_QUEUE_TOKEN or --token-file override both.")
    # Least privilege (docs/SECURITY.md "Roles"): each role's token in its own file (chmod 600).
    producer_token_file: str | None = Field(default=None, description="A file whose first line is the producer role's token: PUT (keyed, WAIT), JOB, TOTAL, STATS (docs/SECURITY.md \"Roles\").")
    worker_token_file: str | None = Field(default=None, description="The worker role's token file: GET, GETB, GETBE, DONE, FAIL, LATER, TOUCH, PUT (replies, follow-ups) and the producer's reads.")
    operator_token_file: str | None = Field(default=None, description="The operator role's token file: RETRY, DELETE, JOBS, RUNLIST and the reads.")
    cluster_token_file: str | None = Field(default=None, description="The cluster's own credential: LEASE, PROMOTE, FOLLOW, REPLACK, SNAPSHOT/INTERCONNECT <n> <ip> <port> and SYNC records need it (then token_file's admin token no longer does); replicas, --join and the manager's sentinel send it.")
    producer_queues: list[str] | None = Field(default=None, description="The queues the producer token may touch (names or globs: [\"mail*\", \"thumbs\"]); unset: every queue.")
    worker_queues: list[str] | None = Field(default=None, description="The queues the worker token may touch (names or globs); unset: every queue.")
    operator_queues: list[str] | None = Field(default=None, description="The queues the operator token may touch (names or globs); unset: every queue.")
    max_clients: int = Field(default=10000, ge=1, description="Connections served at once (replication links included); one more gets `503 Too Many Clients` and is closed. The open-file limit is raised to fit when allowed.")
    idle_timeout_s: float = Field(default=0.0, ge=0, description="Close a connection that sent nothing for this long (0: never). Clients blocked in GETB/GETBE/WAIT and replication links are never closed for idling.")
    output_soft_limit_bytes: int = Field(default=1024 * 1024, ge=1, description="A client whose replies not yet sent pass this is not read any further until they drain (a pipelining client that does not read stops being served; others are not affected).")
    output_hard_limit_bytes: int = Field(default=1024 * 1024 * 1024, ge=1, description="A client whose replies not yet sent pass this (one huge STATS, RUNLIST DATA, SNAPSHOT or batch) is disconnected and logged. A replica's first SNAPSHOT is exempt.")
    max_input_bytes: int = Field(default=256 * 1024 * 1024, ge=1024 * 1024, le=2**40, description="Input held unread for all clients together (data blocks being received, requests queued behind a blocked client). A block that does not fit gets `503 Busy Input Full` and the connection is closed; past it, connections whose unread input grows are not read until the total is under 3/4 of it, and past 9/8 of it the biggest of them are cut. Nothing acknowledged is lost.")
    max_output_bytes: int = Field(default=1024 * 1024 * 1024, ge=1024 * 1024, le=2**42, description="Replies not yet read by their clients, all clients together (each one is bounded by output_hard_limit_bytes as well): past it, looked at every 0.5 s, the clients holding the most are disconnected and logged. Replication links are exempt (replica_backlog_bytes bounds them).")
    auth_timeout_s: float = Field(default=5.0, gt=0, le=3600, description="With a token: a connection not authenticated this long after it opened is closed with `401 Auth Required`.")
    max_unauthenticated_clients: int = Field(default=1000, ge=1, le=1_000_000, description="With a token: connections not authenticated yet, at most; a new one (or one arriving at max_clients) takes the place of the oldest of them, never of an authenticated client.")
    unauthenticated_input_bytes: int = Field(default=4096, ge=256, le=1024 * 1024, description="With a token: all a connection may send before AUTH (lines and data blocks); more gets `401 Auth Required` (a bigger block `413 Job Too Large`) and the connection is closed.")
    keep_done_total_max: int = Field(
        default=1_000_000, ge=0, le=100_000_000,
        description="Finished jobs kept over all queues (each queue keeps at most its keep_done_max "
                    "for keep_done_s): past it, each DONE drops the oldest finished job of its own "
                    "queue. About 180 bytes each beside their data and results (292 B with 32-byte "
                    "data and a 16-byte result), so the default bounds them near 0.2 GB plus data. 0: no finished job is kept (RESULT then answers 404).")
    forget_drained_queues_s: float = Field(default=600.0, ge=0, le=10**9, description="A queue with no job ready, delayed or running, no dead job, no finished job kept (keep_done_s) and no client waiting on it is forgotten this long after it drained (STATS stops listing it; its counters start again from 0 if it comes back). 0: never.")

    @field_validator("lock_timeouts_s")
    @classmethod
    def _lock_times_are_bounded(cls, value: dict[str, float]) -> dict[str, float]:
        # The server adds a lock time to now and logs the sum as a unix time: bounded as the
        # door bounds EXPIRE (queue_server/protocol/numbers.py), so the log replays it.
        for queue, seconds in value.items():
            if not (math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS):
                raise ValueError(f"lock_timeouts_s.{queue} must be > 0 and <= {MAX_SECONDS}, got {seconds}")
        return value

    @field_validator("producer_queues", "worker_queues", "operator_queues")
    @classmethod
    def _queue_globs(cls, value: list[str] | None) -> list[str] | None:
        for glob in value or ():
            if not glob or len(glob) > 128 or not all(c.isascii() and (c.isalnum() or c in "_*?[]!-") for c in glob):
                raise ValueError(f"a role's queue {glob!r} is not a queue name or glob ([A-Za-z0-9_] and * ? [ ])")
        return value

    @field_validator("listen", "replica_of")
    @classmethod
    def _is_host_port(cls, value: str | None) -> str | None:
        if value is not None:
            parse_host_port(value)
        return value

    @field_validator("token")
    @classmethod
    def _token_is_sendable(cls, value: str | None) -> str | None:
        return None if value is None else check_token(value, what="queue_server.token")

    @model_validator(mode="after")
    def _one_token_source(self) -> QueueServerConfig:
        if self.token is not None and self.token_file is not None:
            raise ValueError("queue_server: give token or token_file, not both")
        if self.managed_failover and self.lease_s >= self.promote_after_s:
            raise ValueError(f"queue_server: lease_s ({self.lease_s}) must be shorter than "
                             f"promote_after_s ({self.promote_after_s})")
        if self.output_soft_limit_bytes > self.output_hard_limit_bytes:
            raise ValueError(f"queue_server: output_soft_limit_bytes ({self.output_soft_limit_bytes}) "
                             f"> output_hard_limit_bytes ({self.output_hard_limit_bytes})")
        if self.max_input_bytes < self.max_job_bytes:
            raise ValueError(f"queue_server: max_input_bytes ({self.max_input_bytes}) < "
                             f"max_job_bytes ({self.max_job_bytes}): no job of the largest size could be read")
        return self


class RateLimitConfig(_Strict):
    permits: int = Field(ge=1, description="Permits (calls) allowed per period across the whole cluster.")
    period_s: float = Field(default=1.0, gt=0, description="The period the permits are for: permits = 10, period_s = 1 is 10 calls per second.")
    margin: float = Field(
        default=0.02, ge=0, lt=0.5,
        description="Fraction of the rate left unused: permits go out at permits / period_s x "
                    "(1 - margin), so calls that leave a millisecond off their turn stay under a "
                    "provider that counts a strict window (at exactly 10/s, a call 0.6 ms early "
                    "against the one ten before it got a 429). 0 for a provider with slack.")


class QueueConfig(_Strict):
    priority: int = Field(default=0, description="Higher gets slots first when the cluster is short (minimums first, then demand weighted by priority).")
    min_slots: int = Field(default=0, ge=0, description="Slots the queue keeps even when idle (e.g. 1 for synchronous calls).")
    max_slots: int = Field(default=1000, ge=0, description="Most slots the planner gives the queue.")
    batch_size: int = Field(default=10, ge=1, description="Jobs a slot fetches and hands to handle() at once. Written here it wins over the handler class's batch_size; left out, the class's value is used.")
    lock_timeout_s: float = Field(
        default=60.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
        description="Lock time of a job handed out to a slot: if it is not DONE (or its lock "
                    "renewed with TOUCH, which a live slot does) within this many seconds, it "
                    "counts as a failed attempt and comes back after its backoff.")
    max_attempts: int = Field(
        default=25, ge=1,
        description="Runs a job gets: after this many failed attempts it is dead (kept, "
                    "never handed out again, until retried by hand).")
    retry_base_s: float = Field(
        default=15.0, ge=0, le=MAX_SECONDS, allow_inf_nan=False,
        description="Wait after a job's first failure; each further failure doubles it "
                    "(plus up to 25% random jitter), up to retry_max_s.")
    retry_max_s: float = Field(
        default=86400.0, ge=0, le=MAX_SECONDS, allow_inf_nan=False,
        description="Longest wait between two attempts of a failed job, in seconds.")
    dead_max: int = Field(
        default=10_000, ge=0,
        description="Dead jobs kept for this queue; past it the oldest are dropped "
                    "(counted in STATS dead_dropped and logged as a warning).")
    dead_max_age_s: float = Field(
        default=15_552_000.0, gt=0,
        description="Dead jobs older than this (seconds; default 180 days) are dropped "
                    "(counted and logged as a warning).")
    errors_kept: int = Field(
        default=5, ge=1, le=50,
        description="Errors a job keeps, of its last failed attempts (time, attempt, text): the "
                    "last one up to 16 KiB, earlier ones cut to their last 2 KiB. `slotmap job`, "
                    "the API and the job page show them.")
    keep_done_max: int = Field(
        default=1000, ge=0, le=10_000_000,
        description="Finished jobs kept for this queue (0: none), with their times, attempts, "
                    "errors, the connection that finished them and their result: `slotmap job`, "
                    "`slotmap result`, the API and the job page show them. About 180 bytes each "
                    "beside their data and result; past it the oldest go.")
    keep_done_s: float = Field(
        default=3600.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
        description="Finished jobs older than this (seconds since they finished) are no longer kept.")
    max_result_bytes: int = Field(
        default=64 * 1024, ge=0, le=64 * 1024 * 1024,
        description="Largest result kept with a finished job (a handler's return value or "
                    "job.result(data)); a bigger one is not kept, and the job says how large it was.")
    private_dirty_limit_bytes: int = Field(default=256 * 1024 * 1024, ge=1, description="A slot whose Private_Dirty memory passes this finishes its batch and exits; its master forks a fresh one. One whose setup() alone passes it (a model loaded per slot) is recycled only past its setup's level plus this, since a fresh fork would load the same; it logs a warning saying so.")
    # Recycling after jobs or an age (config/recycling.py holds the fields and why the jitter is absolute).
    max_jobs_per_slot: int = MAX_JOBS_PER_SLOT
    max_jobs_per_slot_jitter: int = MAX_JOBS_PER_SLOT_JITTER
    max_slot_age_s: float = MAX_SLOT_AGE_S
    max_slot_age_jitter_s: float = MAX_SLOT_AGE_JITTER_S
    rate_limit: RateLimitConfig | None = Field(default=None, description="Cluster-wide limiter named after the queue: each job waits for a permit as the handler reaches it (self.limiter in the handler).")

    @model_validator(mode="after")
    def _min_not_above_max(self) -> QueueConfig:
        if self.min_slots > self.max_slots:
            raise ValueError(f"min_slots ({self.min_slots}) > max_slots ({self.max_slots})")
        if self.retry_base_s > self.retry_max_s:
            raise ValueError(f"retry_base_s ({self.retry_base_s}) > retry_max_s ({self.retry_max_s})")
        check_recycling(max_jobs=self.max_jobs_per_slot, jobs_jitter=self.max_jobs_per_slot_jitter,
                        max_age_s=self.max_slot_age_s, age_jitter_s=self.max_slot_age_jitter_s)
        return self


class MasterConfig(_Strict):
    host_name: str | None = Field(default=None, pattern=HOST_NAME_PATTERN, description="This host's name in reports and the slot map (letters, digits, '.', '_', '-'; up to 253 characters); default: the machine's host name.")
    max_beacon_bytes: int = Field(
        default=64 * 1024, ge=4096,
        description="A slot's beacon larger than this is refused by ZeroMQ (MAXMSGSIZE) and the slot "
                    "disconnected; a real beacon is under 1 KiB.",
    )
    python_path: list[str] = Field(default_factory=list, description="Folders put at the front of sys.path before handler_modules are imported; a relative folder is relative to the config file's folder (\".\" is that folder), so the master finds the code wherever it starts.")
    handler_modules: list[str] = Field(default_factory=list, description="Modules the master imports before forking (dotted names, found on sys.path after python_path); their @handler classes serve the queues.")
    max_slots: int = Field(default=64, ge=0, description="Most slots this host runs, whatever its memory allows.")
    reserve_slots: int = Field(default=1, ge=0, description="Slots' worth of memory kept free below what PSS and MemAvailable allow.")
    max_load_per_cpu: float = Field(
        default=4.0, gt=0,
        description="Capacity is also bounded by the 1-minute load average per CPU: above "
                    "max_load_per_cpu x CPUs the slots get the room the outside load (the load "
                    "less this host's busy slots) leaves, at least min_slots_under_load.",
    )
    min_slots_under_load: int = Field(
        default=1, ge=0,
        description="The fewest slots the load bound leaves (memory and max_slots still bound "
                    "them): a host whose load stays high because of other programs keeps serving "
                    "its queues, slowly, instead of stopping. 1 rather than the CPU count: the "
                    "host is already over its limit, one slot keeps the queues moving while "
                    "yielding the CPUs to the rest; 0 lets the load stop the host. Under a "
                    "manager the queues' min_slots, and one slot for each queue with waiting "
                    "jobs, outrank the load bound (within memory and max_slots), however low "
                    "this floor.",
    )
    beacon_interval_ms: int = Field(default=200, ge=10, description="How often each slot reports to its master.")
    hung_after_beacons: int = Field(default=3, ge=1, description="A slot silent for this many beacon intervals is hung and killed, unless its CPU time grew meanwhile: then it is busy in code that holds the GIL (a big sort, json.loads of megabytes), and it is looked at again after as long (its memory read from /proc, its batch still bound by batch_timeout_s).")
    hard_memory_limit_bytes: int = Field(default=1024 * 1024 * 1024, ge=1, description="A slot over this memory is killed at once (no waiting for its batch).")
    stop_deadline_s: float = Field(default=10.0, gt=0, description="A stopping slot gets SIGTERM (finish the batch), then SIGKILL after this long.")
    stop_timeout_s: float = Field(
        default=30.0, gt=0, le=86400,
        description="The master's graceful stop (SIGTERM): its slots stop fetching, finish the job "
                    "they run and give the unstarted jobs of their batch back to the head of their "
                    "queue uncharged; a job still running after this long is killed (SIGKILL) and "
                    "given back uncharged, to run again from its start. Keep systemd's "
                    "TimeoutStopSec above it. A master that dies (kill -9) leaves its slots to "
                    "stop the same way on their own: each renews its batch's locks itself for up "
                    "to this long while it finishes the job it runs.",
    )
    drain_timeout_s: float = Field(
        default=60.0, gt=0, le=86400,
        description="A code reload (SIGHUP): an old slot finishes the job it runs within this "
                    "long, else it is killed and its job given back uncharged; the same bound "
                    "applies to the new code's setup() trial.",
    )
    ipc_dir: str = Field(default="./var/ipc", description="Folder of the ipc:// sockets between the master and its slots (paths stay under 108 bytes).")
    # Static slot map used until a manager assigns one: queue -> slots.
    static_slots: dict[str, int] = Field(default_factory=dict, description="Queue -> slots run until a manager assigns a slot map (or for good without a manager).")


class ManagerConfig(_Strict):
    listen: str = Field(
        default="tcp://127.0.0.1:7500",
        description="ZeroMQ endpoint the masters connect to (tcp://HOST:PORT); checked before the "
                    "manager takes its lock or touches the database.",
    )
    max_message_bytes: int = Field(
        default=1024 * 1024, ge=64 * 1024,
        description="Largest frame a master or the manager may send on the master link "
                    "(ZeroMQ MAXMSGSIZE on both ends): a bigger one is dropped with its connection. "
                    "A report takes about 600 bytes per slot; 1 MiB holds about 1,600 slots.",
    )
    database_url: str = Field(default="sqlite:///./var/slotmap.db", repr=False, description="SQLAlchemy URL of the history (SQLite by default, postgresql://... in production).")
    plan_interval_s: float = Field(default=5.0, gt=0, description="How often the slot map is planned again.")
    burst_check_s: float = Field(
        default=0.25, ge=0, le=60, allow_inf_nan=False,
        description="How often the manager reads the queue server's waiting counts between plans: a "
                    "queue whose backlog appears or doubles, or that has jobs waiting and no slot, gets "
                    "a plan of its own at once (it grows from other queues' idle spares, free capacity "
                    "and lower priorities only, and a queue with no slot takes one from an equal "
                    "priority with nothing waiting or running; a backlog its slots start within 2 s, "
                    "or 2 of its jobs, waits for the next plan). "
                    "0: bursts wait for the next plan.")
    heartbeat_interval_s: float = Field(default=1.0, gt=0, description="Heartbeats between the manager and each master.")
    heartbeat_liveness: int = Field(default=3, ge=1, description="Missed heartbeats after which the other side counts as dead.")
    stats_window_s: float = Field(default=60.0, gt=0, description="The recent window the planner measures each queue's load over.")
    target_load: float = Field(default=0.8, gt=0, description="Load (busy time plus backlog over slot time) the planner sizes queues for.")
    retention_days: float = Field(default=7.0, gt=0, description="History older than this is pruned from the database.")
    max_hosts: int = Field(
        default=1024, ge=1, le=1_000_000,
        description="Most distinct hosts the manager tracks at once: a report naming a new host "
                    "past this is refused (logged, counted) unless a host lost long ago can be "
                    "forgotten to make room. Bounds what a rogue master announcing host names costs.",
    )

    _listen_is_endpoint = field_validator("listen")(_zmq_endpoint)


class PulsarConfig(_Strict):
    """The cluster's rate limiter service: one per cluster."""

    listen: str = Field(
        default="tcp://127.0.0.1:7510",
        description="ZeroMQ endpoint the slots ask for permits (tcp://HOST:PORT); checked before binding.",
    )
    max_message_bytes: int = Field(
        default=16 * 1024, ge=1024,
        description="Largest request frame the pulsar accepts (ZeroMQ MAXMSGSIZE): a bigger one is "
                    "dropped with its connection. Real requests are under 400 bytes.",
    )
    max_pause_s: float = Field(
        default=300.0, gt=0, le=86400.0, allow_inf_nan=False,
        description="The longest pause a handler may ask of a limiter: a longer pause_s is cut to "
                    "this, logged and counted (`capped_pauses`), so that one careless handler cannot "
                    "stop a limiter for a day. A handler that still meets its provider's refusal "
                    "pauses again. An admin lifts a pause with `slotmap limiters resume NAME` or "
                    "the queue's dashboard page.",
    )

    _listen_is_endpoint = field_validator("listen")(_zmq_endpoint)


class ClusterConfig(_Strict):
    queue_server: QueueServerConfig = Field(default_factory=QueueServerConfig, description="The queue server (slotmap queue-server) and where clients find it.")
    queues: dict[str, QueueConfig] = Field(default_factory=dict, description="One [queues.<name>] table per queue; a queue not listed gets the defaults.")
    master: MasterConfig = Field(default_factory=MasterConfig, description="Each host's master (slotmap master): handler code, slots, memory.")
    manager: ManagerConfig = Field(default_factory=ManagerConfig, description="The cluster's manager (slotmap manager): planning, heartbeats, history.")
    admin: AdminConfig = Field(default_factory=AdminConfig, description="The dashboard and JSON API (slotmap admin).")
    pulsar: PulsarConfig = Field(default_factory=PulsarConfig, description="The cluster-wide rate limiter (slotmap pulsar).")
    schedules: dict[str, ScheduleConfig] = Field(
        default_factory=dict,
        description="One [schedules.<name>] table per periodic job: the active manager puts one job "
                    "per tick, keyed <name>@<tick time, ISO 8601 UTC>, exactly once across manager "
                    "failovers (docs/GUIDE.md, Periodic jobs).")
    curve_secret_file: str | None = Field(
        default=None,
        description="This process's CURVE secret key (z85, or a zmq certificate `*.key_secret`): turns "
                    "on CURVE for the master link and the pulsar. With one shared file everywhere it "
                    "is the cluster key; see docs/SECURITY.md for per-host keys.",
    )
    curve_server_key_file: str | None = Field(
        default=None,
        description="The manager's and pulsar's CURVE public key (z85, or a certificate `*.key`) for "
                    "clients whose curve_secret_file is a per-host key; default: the public half of "
                    "curve_secret_file (one shared cluster key).",
    )
    curve_authorized_keys_dir: str | None = Field(
        default=None,
        description="Directory of client public key certificates (`*.key`, from `slotmap manager "
                    "--new-host-key`) the manager and pulsar admit besides the holder of "
                    "curve_secret_file; re-read when it changes.",
    )

    @field_validator("queues")
    @classmethod
    def _queue_names_are_protocol_names(cls, value: dict[str, QueueConfig]) -> dict[str, QueueConfig]:
        import re

        for name in value:
            if not re.match(QUEUE_NAME_PATTERN, name):
                raise ValueError(f"queue name {name!r} must match [A-Za-z0-9_]{{1,128}}")
        return value

    @field_validator("schedules")
    @classmethod
    def _schedule_names_fit_a_key(cls, value: dict[str, ScheduleConfig]) -> dict[str, ScheduleConfig]:
        import re

        for name in value:
            if not re.match(SCHEDULE_NAME_PATTERN, name):
                raise ValueError(f"schedule name {name!r} must match [A-Za-z0-9_.-]{{1,64}} "
                                 "(it begins each fired job's key)")
        return value

    def schedules_without_queue_config(self) -> list[str]:
        """Schedules whose queue no [queues.*] names: a warning at load (the queue still works
        with the defaults, as any queue does, but a typo would fire into a queue nobody serves)."""
        return sorted(name for name, rule in self.schedules.items() if rule.queue not in self.queues)

    @model_validator(mode="after")
    def _security_settings_fit(self) -> ClusterConfig:
        largest = self.master.max_slots * REPORT_BYTES_PER_SLOT + REPORT_OVERHEAD_BYTES
        if largest > self.manager.max_message_bytes:
            raise ValueError(
                f"manager.max_message_bytes ({self.manager.max_message_bytes}) is below the report of "
                f"a host with master.max_slots = {self.master.max_slots} (about {largest} bytes)"
            )
        if (self.curve_server_key_file or self.curve_authorized_keys_dir) and not self.curve_secret_file:
            raise ValueError("curve_server_key_file and curve_authorized_keys_dir need curve_secret_file")
        return self
