"""The queue server's settings, one frozen value built by cli.py from the command line and
the config (a leaf module: every part of the server may read it, none of them imports server.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

from queue_server.protocol.retry import DEFAULT_KEEP_DONE_TOTAL, QueuePolicy
from queue_server.server.grants import Role, RoleToken
from queue_server.server.persistence import FsyncPolicy
from queue_server.server.replication import SyncSettings


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 7400
    data_dir: str = "./var/queue"
    fsync: FsyncPolicy = "always"
    expire_done_default: bool = False
    token: str | None = field(default=None, repr=False)  # a repr may reach a log line
    # The roles' tokens (grants.py; docs/SECURITY.md "Roles"); `token` is the admin's.
    role_tokens: tuple[RoleToken, ...] = field(default=(), repr=False)
    max_job_bytes: int = 1024 * 1024
    snapshot_log_bytes: int = 256 * 1024 * 1024
    lock_timeouts_s: tuple[tuple[str, float], ...] = ()
    # Per queue: retry curve, max_attempts and dead bounds ([queues.<q>]; others: defaults).
    policies: tuple[tuple[str, QueuePolicy], ...] = ()
    keep_done_total: int = DEFAULT_KEEP_DONE_TOTAL  # finished jobs kept over all queues (kept.py)
    server_id: int = 1
    replica_of: tuple[str, int] | None = None  # follow this primary (queue_server/server/follower.py)
    replica_backlog_bytes: int = 256 * 1024 * 1024  # unread stream that cuts a replica off
    promote_after_s: float = 5.0
    managed: bool = False  # the manager grants the lease and decides the primary (roles.py)
    sync: SyncSettings = field(default_factory=SyncSettings)  # replicate = "sync" and its bounds (replication.py)
    join: tuple[tuple[str, int], ...] = ()  # peers asked at start (queue_server/server/join.py)
    # The door's bounds (queue_server/server/connection.py; README "Limits"):
    max_clients: int = 10000
    idle_timeout_s: float = 0.0  # 0: idle connections are never closed
    output_soft_limit_bytes: int = 1024 * 1024  # unsent replies past this: stop reading
    output_hard_limit_bytes: int = 1024 * 1024 * 1024  # unsent replies past this: disconnect
    # Across all connections (queue_server/server/door.py):
    max_input_bytes: int = 256 * 1024 * 1024  # unread input held for all clients together
    max_output_bytes: int = 1024 * 1024 * 1024  # unsent replies of all clients together
    auth_timeout_s: float = 5.0  # with a token: closed when not authenticated by then
    max_unauthenticated_clients: int = 1000  # a new one takes the place of the oldest
    unauthenticated_input_bytes: int = 4096  # all a client may send before AUTH
    # A queue with no job, dead job or waiter is forgotten after this long (0: never).
    forget_drained_queues_s: float = 600.0

    @property
    def cluster_token(self) -> str | None:
        """What this server sends to its peers (a replica's link, --join): the cluster's
        credential when one is configured, else the admin token (as before roles)."""
        for role_token in self.role_tokens:
            if role_token.role is Role.CLUSTER:
                return role_token.token
        return self.token
