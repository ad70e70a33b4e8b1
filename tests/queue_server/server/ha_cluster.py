"""Three queue servers in sync mode under a real manager's failover (issue 17), for the
failover tests and bench/replication.py --failovers: start the cluster, kill the primary
and time the failover to the first write acknowledged after it, restart the killed one.
Real processes; the manager gets the default lease_s and promote_after_s."""
from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from procs import spawn_slotmap, to_toml, wait_listening
from sqlalchemy import select
from sqlalchemy.orm import Session

from manager.storage.db import Event, make_engine
from tests.queue_server import server_proc
from tests.queue_server.server.ha import KeyedProducer, role
from tests.queue_server.util import poll_until

FAILOVER_DEADLINE_S = 40.0  # generous: a busy CI machine
# ROLE answered in a poll whose failure is not retried (2 s was little room for a server
# busy with producers and fsync on a loaded machine).
REPLY_TIMEOUT_S = 10.0
SERVER_ARGS = ("--managed", "--replicate", "sync", "--sync-timeout", "1")
# start(*args, data_dir=None, port=None) -> a started server (tests/conftest.py QueueServer)
StartServer = Callable[..., object]


@dataclass
class HaCluster:
    root: Path
    start: StartServer
    servers: list = field(default_factory=list)  # type: ignore[type-arg]
    manager: object = None
    database_url: str = ""
    server_args: tuple[str, ...] = SERVER_ARGS

    @property
    def addresses(self) -> list[str]:
        return [server.address for server in self.servers]

    def views(self) -> dict[str, list[bytes] | None]:
        found: dict[str, list[bytes] | None] = {}
        for server in self.servers:
            try:
                found[server.address] = role(server.connect(timeout_s=1.0))
            except (AssertionError, OSError):
                found[server.address] = None
        return found

    def primary(self, epoch_above: int = 0) -> object | None:
        """The server that is primary, leased and in sync, in an epoch above `epoch_above`."""
        for server in self.servers:
            if not server.is_running():
                continue
            try:
                words = role(server.connect(timeout_s=1.0))
            except (AssertionError, OSError):
                continue
            if words[0] == b"primary" and words[5] == b"held" and int(words[4]) > epoch_above:
                return server
        return None

    def events(self, kind: str) -> list[Event]:
        engine = make_engine(self.database_url)
        try:
            with Session(engine) as session:
                return list(session.scalars(select(Event).where(Event.kind == kind)))
        finally:
            engine.dispose()

    def restart(self, server):  # type: ignore[no-untyped-def]
        """The killed server back on its port with its data: the manager makes it FOLLOW."""
        again = self.start(*self.server_args, data_dir=server.data_dir, port=server.port)
        self.servers[self.servers.index(server)] = again
        return again


@contextlib.contextmanager
def managed_cluster(root: Path, database_url: str, start: StartServer,
                    server_args: tuple[str, ...] = SERVER_ARGS,
                    manager_settings: Mapping[str, object] | None = None) -> Iterator[HaCluster]:
    """Three servers (the first primary) and the manager as sentinel, the first leased;
    `manager_settings` go into the manager's [queue_server] table only (not the servers')."""
    cluster = HaCluster(root, start, database_url=database_url, server_args=server_args)
    first = start(*server_args)
    cluster.servers.append(first)

    def replica(server_id: int):  # type: ignore[no-untyped-def]
        return start(*server_args, "--replica-of", first.address, "--server-id", str(server_id))

    # Both replicas start at once: a start is mostly the interpreter importing the server,
    # and a cluster's setup was four of them in a row.
    with ThreadPoolExecutor(max_workers=2) as pool:
        cluster.servers.extend(pool.map(replica, (2, 3)))
    process = start_manager(root, cluster.addresses, database_url, settings=manager_settings)
    cluster.manager = process
    try:
        poll_until(lambda: cluster.primary() is first, timeout_s=FAILOVER_DEADLINE_S,
                   what=lambda: f"the first primary leased: {cluster.views()}\n"
                                f"{(root / 'manager.log').read_text()}")
        yield cluster
    finally:
        process.kill()
        process.wait(timeout=10)


def start_manager(root: Path, servers: list[str], database_url: str, name: str = "manager",
                  settings: Mapping[str, object] | None = None) -> subprocess.Popen[bytes]:
    """The manager, once it listens on its port (another one when another process took it
    first); its config and log are `<name>.toml` and `<name>.log` in `root`; `settings`
    add to (or override) its [queue_server] table."""
    config = root / f"{name}.toml"
    for _ in range(server_proc.BIND_ATTEMPTS):
        port = server_proc.free_port()
        config.write_text(to_toml({
            "queue_server": {"servers": servers, "managed_failover": True,
                             "replicate": "sync",  # default lease_s and promote_after_s
                             **(settings or {})},
            "manager": {"listen": f"tcp://127.0.0.1:{port}", "database_url": database_url},
        }))
        process = spawn_slotmap(["manager", "--config", str(config)], log_path=root / f"{name}.log",
                                cwd=root)
        if wait_listening(process, port, root / f"{name}.log", what="the manager"):
            return process
    raise AssertionError(f"the manager found no free port in {server_proc.BIND_ATTEMPTS} attempts")


def fail_over_once(ha: HaCluster, producers: list[KeyedProducer], primary, epoch: int):  # type: ignore[no-untyped-def]
    """Kill the primary, wait for the new one and a write it acknowledged, restart the
    killed one and wait until both replicas are in sync again: (new primary, seconds from
    the kill to the first acknowledged write)."""
    before = acked_keys(producers)
    poll_until(lambda: acked_keys(producers) >= before + 20, timeout_s=FAILOVER_DEADLINE_S,
               what="writes before the kill")
    primary.kill()
    killed_at = time.monotonic()
    after_kill = acked_keys(producers)
    new = poll_until(lambda: ha.primary(epoch_above=epoch - 1), interval_s=0.005,
                     timeout_s=FAILOVER_DEADLINE_S, what=lambda: f"epoch {epoch}: {ha.views()}")
    # The promotion is over, so the killed one comes back as a replica as before; its start
    # (an interpreter's, most of a second: 9 of the ten failovers' 34 s) overlaps the wait
    # for the first acknowledged write.
    with ThreadPoolExecutor(max_workers=1) as pool:
        restarted = pool.submit(ha.restart, primary)
        poll_until(lambda: acked_keys(producers) > after_kill, interval_s=0.005,
                   timeout_s=FAILOVER_DEADLINE_S, what="a write acknowledged after the kill")
        seconds = time.monotonic() - killed_at
        restarted.result()
    poll_until(lambda: linked_replicas(new) == 2, timeout_s=FAILOVER_DEADLINE_S,
               what=lambda: f"both replicas back in sync: {ha.views()}")
    return new, seconds


def acked_keys(producers: list[KeyedProducer]) -> int:
    return sum(len(p.acked) for p in producers)


def linked_replicas(server) -> int:  # type: ignore[no-untyped-def]
    words = role(server.connect(timeout_s=REPLY_TIMEOUT_S))
    return len(words[6].split(b",")) if words[6] != b"-" else 0
