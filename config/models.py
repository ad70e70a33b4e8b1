"""Pydantic models of the cluster config (TOML): one section per part of the platform."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

QUEUE_NAME_PATTERN = r"^[A-Za-z0-9_]{1,128}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def parse_host_port(value: str) -> tuple[str, int]:
    """Split 'host:port' (IPv6 in brackets allowed); raise ValueError with the reason."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


class QueueServerConfig(_Strict):
    listen: str = "127.0.0.1:7400"
    data_dir: str = "./var/queue"
    fsync: Literal["always", "everysec", "never"] = "always"
    expire_action: Literal["later", "done"] = "later"
    token: str | None = None
    max_job_bytes: int = Field(default=1024 * 1024, ge=1)
    snapshot_log_bytes: int = Field(default=256 * 1024 * 1024, ge=4096)
    # Default lock time for jobs handed out without EXPIRE, per queue (over [queues.*].lock_timeout_s).
    lock_timeouts_s: dict[str, float] = Field(default_factory=dict)
    servers: list[str] = Field(default_factory=list)
    # Follow this primary (HOST:PORT) as a replica; promoted after promote_after_s without it.
    replica_of: str | None = None
    promote_after_s: float = Field(default=5.0, gt=0)
    # The cluster's servers asked at start (queue_server/join.py): if any answers, this one
    # becomes a replica of the lowest id with the highest id + 1.
    join: list[str] = Field(default_factory=list)
    # A replica whose unread stream passes this is cut off and must resync from a snapshot.
    replica_backlog_bytes: int = Field(default=256 * 1024 * 1024, ge=1)

    @field_validator("listen", "replica_of")
    @classmethod
    def _is_host_port(cls, value: str | None) -> str | None:
        if value is not None:
            parse_host_port(value)
        return value


class RateLimitConfig(_Strict):
    permits: int = Field(ge=1)
    period_s: float = Field(default=1.0, gt=0)


class QueueConfig(_Strict):
    priority: int = 0
    min_slots: int = Field(default=0, ge=0)
    max_slots: int = Field(default=1000, ge=0)
    batch_size: int = Field(default=10, ge=1)
    lock_timeout_s: float = Field(default=7200.0, gt=0)
    private_dirty_limit_bytes: int = Field(default=256 * 1024 * 1024, ge=1)
    rate_limit: RateLimitConfig | None = None

    @model_validator(mode="after")
    def _min_not_above_max(self) -> QueueConfig:
        if self.min_slots > self.max_slots:
            raise ValueError(f"min_slots ({self.min_slots}) > max_slots ({self.max_slots})")
        return self


class MasterConfig(_Strict):
    host_name: str | None = None
    handler_modules: list[str] = Field(default_factory=list)
    max_slots: int = Field(default=64, ge=0)
    reserve_slots: int = Field(default=1, ge=0)
    max_load_per_cpu: float = Field(default=4.0, gt=0)
    beacon_interval_ms: int = Field(default=200, ge=10)
    hung_after_beacons: int = Field(default=3, ge=1)
    hard_memory_limit_bytes: int = Field(default=1024 * 1024 * 1024, ge=1)
    stop_deadline_s: float = Field(default=10.0, gt=0)
    ipc_dir: str = "./var/ipc"
    # Static slot map used until a manager assigns one: queue -> slots.
    static_slots: dict[str, int] = Field(default_factory=dict)


class ManagerConfig(_Strict):
    listen: str = "tcp://127.0.0.1:7500"
    database_url: str = "sqlite:///./var/slotmap.db"
    plan_interval_s: float = Field(default=5.0, gt=0)
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    heartbeat_liveness: int = Field(default=3, ge=1)
    stats_window_s: float = Field(default=60.0, gt=0)
    target_load: float = Field(default=0.8, gt=0)
    retention_days: float = Field(default=7.0, gt=0)


class AdminConfig(_Strict):
    listen: str = "127.0.0.1:8400"
    token: str | None = None
    # With a token: reading pages, the API and /metrics needs it too.
    protect_reads: bool = False
    refresh_s: float = Field(default=5.0, ge=0)

    @field_validator("listen")
    @classmethod
    def _listen_is_host_port(cls, value: str) -> str:
        parse_host_port(value)
        return value


class PulsarConfig(_Strict):
    """The cluster's rate limiter service: one per cluster."""

    listen: str = "tcp://127.0.0.1:7510"


class ClusterConfig(_Strict):
    queue_server: QueueServerConfig = Field(default_factory=QueueServerConfig)
    queues: dict[str, QueueConfig] = Field(default_factory=dict)
    master: MasterConfig = Field(default_factory=MasterConfig)
    manager: ManagerConfig = Field(default_factory=ManagerConfig)
    admin: AdminConfig = Field(default_factory=AdminConfig)
    pulsar: PulsarConfig = Field(default_factory=PulsarConfig)
    curve_secret_file: str | None = None

    @field_validator("queues")
    @classmethod
    def _queue_names_are_protocol_names(cls, value: dict[str, QueueConfig]) -> dict[str, QueueConfig]:
        import re

        for name in value:
            if not re.match(QUEUE_NAME_PATTERN, name):
                raise ValueError(f"queue name {name!r} must match [A-Za-z0-9_]{{1,128}}")
        return value
