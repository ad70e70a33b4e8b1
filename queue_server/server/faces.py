"""The server and a connection as the rest of the package sees them: Protocols, so that the
command modules, AUTH, housekeeping and the follower import neither server.py nor
connection.py, and the package's import graph has no circle (issue 17;
tests/house/test_import_graph.py). QueueServer and Connection match them
structurally: mypy checks it where server.py builds a Connection of itself.
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from queue_server.protocol.commands import Command, Parsed
from queue_server.protocol.framing import FrameReader
from queue_server.server.authority import Term
from queue_server.server.cancel_ring import CancelRing
from queue_server.server.cohort import Member
from queue_server.server.door import Door, Guest
from queue_server.server.grants import Grant, Grants
from queue_server.server.journal import Journal, Link
from queue_server.server.liveness import Upstream
from queue_server.server.persistence import DataDir
from queue_server.server.replay import SyncCommand
from queue_server.server.replica_health import ReplicationHealth
from queue_server.server.replication import Replication, TurnConn
from queue_server.server.settings import ServerSettings
from queue_server.server.stats import Asker, StatsBuilds
from queue_server.server.store import Store
from queue_server.server.waiters import Waiter, Waiters


class Conn(Guest, Member, TurnConn, Asker, Link, Protocol):
    """One client connection (connection.py): what the door, the group commit's cohort,
    sync mode, STATS and the journal need of it (the bases), and the commands and AUTH."""
    server: Server
    reader: FrameReader
    pending: Parsed | None  # a request waiting for its data block
    may_send_states: bool
    grant: Grant | None  # its role (grants.py); None: unlimited
    fast_put: bool  # the plain PUT's fast path needs no question of its role
    refusals_logged: set[str] | None
    unauthenticated_left: int
    auth_failures: int
    hold: str | None  # why its requests are not read for now
    waiter: Waiter | None
    door: str | None  # CLIENT NAME
    door_by: bytes  # b" BY <CLIENT NAME>", b"" without one (its hand-outs' records)
    active: bool  # sent something since the idle sweep last looked
    idle_since: float

    def __hash__(self) -> int: ...  # a replication link is a key (replication.py)

    def process(self) -> None: ...

    def write(self, reply: bytes) -> None: ...

    def write_status(self, reply: bytes) -> None: ...

    def hold_reading(self, reason: str) -> None: ...

    def release_hold(self) -> None: ...

    def refuse_cross_protocol(self, kind: str) -> bool: ...

    def peer_gone(self) -> bool: ...

    def quit(self) -> None: ...

    def close(self) -> None: ...

    def start_replication(self, peer: bytes, *, may_confirm: bool = True) -> None: ...


class Server(Protocol):
    """The queue server (server.py, with roles.py's Roles): its state and what its
    connections, commands, housekeeping and follower call."""
    settings: ServerSettings
    token: bytes | None  # None: no token configured (a placeholder else: grants compares)
    grants: Grants
    store: Store
    waiters: Waiters
    cancels: CancelRing
    connections: set[Conn]
    door: Door[Conn]
    journal: Journal[Conn]
    data_dir: DataDir
    stats_builds: StatsBuilds
    offline: bool
    following: bool
    replication: ReplicationHealth
    replicas: Replication[Conn]
    term: Term
    log_error: OSError | None
    upstream: Upstream | None

    # connection.py: requests in, replies out
    def process_and_answer(self, conn: Conn) -> None: ...

    def fire_timers_if_due(self, *, dead_ages: bool = False) -> None: ...

    def prune_finished_jobs(self) -> None: ...

    def max_data_bytes(self, parsed: Parsed) -> int: ...

    def execute(self, conn: Conn, command: Command) -> None: ...

    def execute_with_data(self, conn: Conn, parsed: Parsed, data: bytes) -> None: ...

    def put_plain(self, conn: Conn, queue: str, priority: int, data: bytes) -> None: ...

    def mark_dirty(self, conn: Conn) -> None: ...

    def answer(self, waiter: Waiter, reply: list[bytes] | bytes) -> None: ...

    def refuse_waiters(self) -> None: ...

    # lifecycle and the log
    def shutdown(self) -> None: ...

    def log_failed(self, error: OSError) -> None: ...

    def flush_records(self) -> bool: ...

    def start_snapshot(self) -> None: ...

    # replication (server.py) and the manager's word (roles.py)
    def link_replica(self, conn: Conn, peer: bytes, *, may_confirm: bool = True) -> None: ...

    def position(self) -> int: ...

    def replace_state(self, blob: bytes) -> bool: ...

    def apply_replicated(self, commands: list[SyncCommand]) -> None: ...

    def promote(self) -> None: ...

    def lease(self, epoch: int, lease_ms: int, echo_ms: int, alone: bool = False) -> bytes: ...

    def promote_by_manager(self, epoch: int) -> bytes: ...

    def follow(self, primary: tuple[str, int], epoch: int) -> bytes: ...

    def replica_acked(
        self, conn: Hashable, confirmed_bytes: int, confirmed_records: int | None
    ) -> None: ...

    def replication_tick(self) -> None: ...
