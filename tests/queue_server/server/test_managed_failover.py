"""Failover decided by the manager through the cluster database (issue 17, D and E): three
real queue servers in sync mode, a real manager on SQLite (PostgreSQL with
SLOTMAP_TEST_PG), producers running. The primary killed -9, or frozen past the promotion
delay and thawed: a replica that was in sync is promoted in a higher epoch, every
acknowledged job is on it, the old primary acknowledges nothing after losing its epoch and
comes back as a replica that dropped what was never confirmed."""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from procs import spawn_slotmap, to_toml
from sqlalchemy import select
from sqlalchemy.orm import Session

from manager.db import Event, make_engine
from tests.queue_server import server_proc
from tests.queue_server.server.ha import (
    KeyedProducer,
    Producer,
    cluster_database,
    drained,
    frozen,
    role,
)
from tests.queue_server.util import poll_until

FAILOVER_DEADLINE_S = 40.0  # generous: a busy CI machine


@dataclass
class HaCluster:
    root: Path
    servers: list = field(default_factory=list)  # type: ignore[type-arg]
    manager: object = None
    database_url: str = ""
    restarted: list = field(default_factory=list)  # type: ignore[type-arg]

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


@pytest.fixture
def ha(tmp_path: Path, start_queue_server) -> Iterator[HaCluster]:  # type: ignore[no-untyped-def]
    with cluster_database(tmp_path) as url:
        yield from _started(HaCluster(tmp_path, database_url=url), start_queue_server)


def _started(cluster: HaCluster, start_queue_server) -> Iterator[HaCluster]:  # type: ignore[no-untyped-def]
    tmp_path = cluster.root
    common = ("--managed", "--replicate", "sync", "--sync-timeout", "1")
    first = start_queue_server(*common)
    cluster.servers.append(first)
    for server_id in (2, 3):
        cluster.servers.append(start_queue_server(
            *common, "--replica-of", first.address, "--server-id", str(server_id)))
    config = tmp_path / "manager.toml"
    config.write_text(to_toml({
        "queue_server": {"servers": cluster.addresses, "managed_failover": True,
                         "replicate": "sync"},  # default lease_s and promote_after_s
        "manager": {"listen": f"tcp://127.0.0.1:{server_proc.free_port()}",
                    "database_url": cluster.database_url},
    }))
    process = spawn_slotmap(["manager", "--config", str(config)], log_path=tmp_path / "manager.log",
                            cwd=tmp_path)
    cluster.manager = process
    try:
        poll_until(lambda: cluster.primary() is first, timeout_s=FAILOVER_DEADLINE_S,
                   what=lambda: f"the first primary leased: {cluster.views()}\n"
                                f"{(tmp_path / 'manager.log').read_text()}")
        yield cluster
    finally:
        process.kill()
        process.wait(timeout=10)
        for server in cluster.restarted:
            server.kill()


def _epoch(server) -> int:  # type: ignore[no-untyped-def]
    return int(role(server.connect(timeout_s=2.0))[4])


def _run_producers(cluster: HaCluster, count: int = 6) -> list[Producer]:
    addresses = [("127.0.0.1", server.port) for server in cluster.servers]
    return [Producer(f"p{n}", addresses).start() for n in range(count)]


def _acked(producers: list[Producer]) -> int:
    return sum(len(producer.acked) for producer in producers)


def _check_survivor(producers: list[Producer], survivor) -> int:  # type: ignore[no-untyped-def]
    for producer in producers:
        producer.finish()
    acked = {data for producer in producers for data in producer.acked}
    lost = acked - drained(survivor.connect(timeout_s=10.0))
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged jobs lost, e.g. {sorted(lost)[:5]}"
    return len(acked)


def test_the_primarys_kill_promotes_an_in_sync_replica_and_loses_nothing(ha: HaCluster) -> None:
    old = ha.servers[0]
    producers = _run_producers(ha)
    poll_until(lambda: _acked(producers) >= 300, timeout_s=FAILOVER_DEADLINE_S)
    old.kill()
    new = poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                     what=lambda: f"a new primary: {ha.views()}")
    assert _epoch(new) == 2
    before = _acked(producers)
    poll_until(lambda: _acked(producers) > before + 50, timeout_s=FAILOVER_DEADLINE_S,
               what="writes acknowledged by the new primary")
    assert _check_survivor(producers, new) > 350
    assert len(ha.events("queue_server_promoted")) == 1


def test_a_frozen_primary_is_replaced_and_acknowledges_nothing_after_its_thaw(ha: HaCluster) -> None:
    old = ha.servers[0]
    producers = _run_producers(ha)
    poll_until(lambda: _acked(producers) >= 300, timeout_s=FAILOVER_DEADLINE_S)
    with frozen(old):
        new = poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                         what=lambda: f"a new primary: {ha.views()}")
        promoted_at = time.monotonic()
        before = _acked(producers)
        poll_until(lambda: _acked(producers) > before + 50, timeout_s=FAILOVER_DEADLINE_S)
    # Thawed: its lease is long over; whatever it read meanwhile is cut, not acknowledged,
    # and the manager makes it follow the new primary (its unconfirmed records dropped).
    poll_until(lambda: (v := ha.views()[old.address]) is not None and v[0] == b"replica"
               and int(v[4]) == 2, timeout_s=FAILOVER_DEADLINE_S,
               what=lambda: f"the old primary following: {ha.views()}")
    assert "deposed in epoch 2" in old.log_text()
    # Never two primaries acknowledging: nothing from the old one once the new one serves.
    late = [at for p in producers for port, at in p.acked_at if port == old.port and at > promoted_at]
    assert not late, f"the deposed primary acknowledged {len(late)} write(s) after the promotion"
    poll_until(lambda: _acked(producers) > before + 100, timeout_s=FAILOVER_DEADLINE_S)
    _check_survivor(producers, new)


def _restart(ha: HaCluster, server, start_queue_server):  # type: ignore[no-untyped-def]
    """The killed server back on its port with its data: the manager makes it FOLLOW."""
    from tests.conftest import QueueServer

    index = ha.servers.index(server)
    again = QueueServer.of(server_proc.start_queue_server(
        ha.root, "--managed", "--replicate", "sync", "--sync-timeout", "1",
        data_dir=server.data_dir, port=server.port))
    ha.servers[index] = again
    ha.restarted.append(again)
    return again


def test_ten_failovers_in_a_row_under_load_lose_nothing(ha: HaCluster, start_queue_server) -> None:  # type: ignore[no-untyped-def]
    """Producers through QueueClient with their own keys; the primary killed -9 ten times,
    each time restarted to come back as a replica. Every acknowledged key is on the last
    primary, exactly once; failover times are measured to the first acknowledged write."""
    producers = [KeyedProducer(f"k{n}", ha.addresses).start() for n in range(4)]
    takeovers: list[float] = []
    try:
        primary = ha.servers[0]
        for epoch in range(2, 12):
            primary, seconds = _fail_over_once(ha, producers, primary, epoch, start_queue_server)
            takeovers.append(seconds)
    finally:
        for producer in producers:
            producer.finish()
    acked = {key.encode() for p in producers for key in p.acked}
    found = drained(primary.connect(timeout_s=10.0))
    assert not acked - found, f"{len(acked - found)} acknowledged jobs lost"
    print(f"failover to the first acknowledged write over {len(takeovers)} failovers: "
          f"p50 {sorted(takeovers)[len(takeovers) // 2]:.2f} s, max {max(takeovers):.2f} s")


def _acked_keys(producers: list[KeyedProducer]) -> int:
    return sum(len(p.acked) for p in producers)


def _fail_over_once(ha: HaCluster, producers: list[KeyedProducer], primary, epoch: int,  # type: ignore[no-untyped-def]
                    start_queue_server):  # type: ignore[no-untyped-def]
    """Kill the primary, wait for the new one and a write it acknowledged, restart the
    killed one and wait until both replicas are in sync again: (new primary, seconds from
    the kill to the first acknowledged write)."""
    before = _acked_keys(producers)
    poll_until(lambda: _acked_keys(producers) >= before + 20, timeout_s=FAILOVER_DEADLINE_S,
               what="writes before the kill")
    primary.kill()
    killed_at = time.monotonic()
    after_kill = _acked_keys(producers)
    new = poll_until(lambda: ha.primary(epoch_above=epoch - 1), interval_s=0.005,
                     timeout_s=FAILOVER_DEADLINE_S, what=lambda: f"epoch {epoch}: {ha.views()}")
    poll_until(lambda: _acked_keys(producers) > after_kill, interval_s=0.005,
               timeout_s=FAILOVER_DEADLINE_S, what="a write acknowledged after the kill")
    seconds = time.monotonic() - killed_at
    _restart(ha, primary, start_queue_server)
    poll_until(lambda: _linked_replicas(new) == 2, timeout_s=FAILOVER_DEADLINE_S,
               what=lambda: f"both replicas back in sync: {ha.views()}")
    return new, seconds


def _linked_replicas(server) -> int:  # type: ignore[no-untyped-def]
    words = role(server.connect(timeout_s=2.0))
    return len(words[6].split(b",")) if words[6] != b"-" else 0


def test_a_primary_restarted_at_once_is_not_leased_again_while_a_replica_is_in_sync(
        ha: HaCluster, start_queue_server) -> None:  # type: ignore[no-untyped-def]
    """Its epoch is not kept across a restart (and with fsync "never" nor is what it
    acknowledged last): the replica in sync is promoted, the restarted one follows it."""
    old = ha.servers[0]
    producers = _run_producers(ha)
    poll_until(lambda: _acked(producers) >= 300, timeout_s=FAILOVER_DEADLINE_S)
    old.kill()
    again = _restart(ha, old, start_queue_server)
    new = poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                     what=lambda: f"a new primary: {ha.views()}")
    assert new is not again
    poll_until(lambda: (v := ha.views()[again.address]) is not None and v[0] == b"replica"
               and int(v[4]) == 2, timeout_s=FAILOVER_DEADLINE_S,
               what=lambda: f"the restarted primary following: {ha.views()}")
    _check_survivor(producers, new)
