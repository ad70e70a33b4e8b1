"""What the dashboard needs to know besides the database: access, refresh, the configured queues, the queue server, the pulsar."""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from admin_ui.host_check import ALWAYS_ALLOWED, allowed_names
from admin_ui.limiters import LimiterReader
from admin_ui.schedule_file import ScheduleFile
from config.curve import client_curve
from config.endpoints import parse_host_port
from config.errors import ConfigError
from config.models import ClusterConfig, QueueConfig
from config.schedules import ScheduleConfig
from config.tokens import read_token_file, role_token


@dataclass(frozen=True, slots=True)
class AdminSettings:
    # None: nobody can change anything (read-only dashboard).
    token: str | None = field(default=None, repr=False)  # a repr may reach a log line
    # (role, token) of the operator's and the viewer's tokens (admin_ui/auth.py), if set.
    role_tokens: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    viewer_job_data: bool = False  # the viewer token may read jobs' data and errors
    # True: reading pages, the API and /metrics needs the token too.
    protect_reads: bool = False
    refresh_s: float = 5.0
    plan_interval_s: float = 5.0
    target_load: float = 0.8
    queues: Mapping[str, QueueConfig] = field(default_factory=dict)
    clock: Callable[[], float] = time.time
    # Where the jobs pages, the jobs API and the queue server's counters on /metrics ask
    # (empty: those answer 503); the AUTH token the queue server wants, if any.
    queue_servers: tuple[str, ...] = ()
    queue_token: str | None = field(default=None, repr=False)
    # Where rate-limited queues' limiter figures come from (None: the pages say none is set).
    limiters: LimiterReader | None = None
    schedules: Mapping[str, ScheduleConfig] = field(default_factory=dict)
    # The config file, read again for its schedules when it changes (None: `schedules` only).
    schedule_file: ScheduleFile | None = None
    # Host header names answered (admin_ui/host_check.py); "*" in it: any.
    allowed_hosts: frozenset[str] = frozenset(ALWAYS_ALLOWED)

    def current_schedules(self) -> Mapping[str, ScheduleConfig]:
        """The schedules of the config file as it is now (what a manager's reload fires)."""
        return self.schedules if self.schedule_file is None else self.schedule_file.current()

    @property
    def forget_after_s(self) -> float:
        """A queue or host not reported for this long is no longer shown as current."""
        return max(60.0, 12 * self.plan_interval_s)

    @classmethod
    def from_config(
        cls, config: ClusterConfig, *, token: str | None = None, protect_reads: bool = False,
        refresh_s: float = 5.0, listen_host: str | None = None, config_file: Path | None = None,
    ) -> AdminSettings:
        if listen_host is None:
            listen_host = parse_host_port(config.admin.listen)[0]
        return cls(
            token=token if token is not None else config.admin.token,
            role_tokens=dashboard_role_tokens(config),
            viewer_job_data=config.admin.viewer_job_data,
            protect_reads=protect_reads,
            refresh_s=refresh_s,
            plan_interval_s=config.manager.plan_interval_s,
            target_load=config.manager.target_load,
            queues=dict(config.queues),
            queue_servers=tuple(config.queue_server.servers or [config.queue_server.listen]),
            queue_token=queue_token(config),
            limiters=LimiterReader(config.pulsar.listen, curve=client_curve(config)),
            schedules=dict(config.schedules),
            schedule_file=None if config_file is None else ScheduleFile(config_file, config.schedules),
            allowed_hosts=allowed_names(config.admin.allowed_hosts, listen_host),
        )


def queue_token(config: ClusterConfig) -> str | None:
    """The operator role's token (retry, delete, JOBS; docs/SECURITY.md "Roles"):
    $SLOTMAP_QUEUE_TOKEN(_FILE), then [queue_server] operator_token_file, then the one admin
    token (token_file or token); ConfigError when it cannot be read."""
    try:
        return role_token(config.queue_server, "operator")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def dashboard_role_tokens(config: ClusterConfig) -> tuple[tuple[str, str], ...]:
    """The operator's and the viewer's tokens from [admin] operator_token_file and
    viewer_token_file (private files; ConfigError otherwise, or for a token given twice)."""
    files = (("operator", config.admin.operator_token_file), ("viewer", config.admin.viewer_token_file))
    try:
        tokens = tuple((role, read_token_file(path)) for role, path in files if path is not None)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if len({token for _, token in tokens}) != len(tokens):
        raise ConfigError("[admin] operator_token_file and viewer_token_file hold the same token")
    return tokens
