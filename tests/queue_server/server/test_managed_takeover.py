"""The authority record against what the servers do (issue 25, points 4 and 5; audit doors 2
and 3): three real queue servers in sync mode, a real manager as sentinel on SQLite
(PostgreSQL with SLOTMAP_TEST_PG).

- Door 2: with `sync_fallback = "async"` the primary goes on alone only once the record
  says no replica is in sync; killed -9 after acknowledging a job alone, no replica (which
  lacks that job) is promoted, and the event and the log say why; started again, the old
  primary is leased again with the job.
- Door 3: after a failover (servers at epoch 2), a manager on a fresh database takes the
  running cluster over in epoch 3: writes work again, and its log says what it found.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from manager.failover import authority
from manager.storage.db import make_engine
from tests.queue_server import server_proc
from tests.queue_server.server.ha import cluster_database, drained, frozen, role
from tests.queue_server.server.ha_cluster import (
    FAILOVER_DEADLINE_S,
    REPLY_TIMEOUT_S,
    SERVER_ARGS,
    HaCluster,
    linked_replicas,
    managed_cluster,
    start_manager,
)
from tests.queue_server.util import poll_until

ClusterOf = Callable[..., contextlib.AbstractContextManager[HaCluster]]


@pytest.fixture
def cluster_of(tmp_path: Path, start_queue_server) -> Iterator[ClusterOf]:  # type: ignore[no-untyped-def]
    from tests.conftest import QueueServer

    restarted: list[QueueServer] = []

    def start(*args: str, data_dir: Path | None = None, port: int | None = None) -> QueueServer:
        if port is None:
            return start_queue_server(*args, data_dir=data_dir)  # type: ignore[no-any-return]
        again = QueueServer.of(server_proc.start_queue_server(tmp_path, *args, data_dir=data_dir,
                                                              port=port))
        restarted.append(again)
        return again

    @contextlib.contextmanager
    def make(*server_args: str) -> Iterator[HaCluster]:
        with cluster_database(tmp_path) as url, \
                managed_cluster(tmp_path, url, start, server_args) as cluster:
            yield cluster
    try:
        yield make
    finally:
        for server in restarted:
            server.kill()


def _record(url: str) -> authority.Record | None:
    engine = make_engine(url)
    try:
        return authority.read(engine)
    finally:
        engine.dispose()


def _put(server, key: str) -> bytes:  # type: ignore[no-untyped-def]
    conn = server.connect(timeout_s=REPLY_TIMEOUT_S)
    data = key.encode()
    conn.send(b"PUT q 0 %d KEY %s\r\n%s" % (len(data), data, data))
    return conn.line()  # type: ignore[no-any-return]


def test_a_primary_alone_is_recorded_before_it_acknowledges_and_no_replica_lacking_it_is_promoted(
        cluster_of: ClusterOf) -> None:
    with cluster_of(*SERVER_ARGS, "--sync-fallback", "async") as ha:
        primary, replicas = ha.servers[0], ha.servers[1:]
        poll_until(lambda: linked_replicas(primary) == 2, timeout_s=FAILOVER_DEADLINE_S,
                   what=lambda: f"both replicas in sync: {ha.views()}")
        assert _put(primary, "before") == b"200 OK KEY before"
        with frozen(replicas[0]), frozen(replicas[1]):
            # Held past sync_timeout_s (1 s), then released alone once the record says so.
            sent = time.monotonic()
            assert _put(primary, "acked") == b"200 OK KEY acked"
            print(f"acknowledged alone {time.monotonic() - sent:.2f} s after the PUT")
            record = _record(ha.database_url)
            primary.kill()
        assert record is not None and not record.in_sync, (
            f"acknowledged alone before the record said no replica is in sync: {record}")
        assert "the manager recorded it first" in primary.log_text()
        poll_until(lambda: ha.events("queue_promotion_refused"), timeout_s=FAILOVER_DEADLINE_S,
                   what=lambda: f"the promotion refused: {ha.views()}\n"
                                f"{(ha.root / 'manager.log').read_text()}")
        # The refusal is the failover's decision, taken at its moment: nobody was promoted.
        assert not ha.events("queue_server_promoted")
        views = ha.views()
        assert all(views[r.address] is not None and views[r.address][0] == b"replica"  # type: ignore[index]
                   for r in replicas), views
        said = (ha.root / "manager.log").read_text()
        assert "not promoting: the primary had gone on alone" in said
        assert "synchronous replication lost: recorded before it goes on alone" in \
            ha.events("queue_sync_lost")[0].message
        # What the guide says to do: start it again; the manager leases it, nothing lost.
        again = ha.restart(primary)
        poll_until(lambda: ha.primary() is again, timeout_s=FAILOVER_DEADLINE_S,
                   what=lambda: f"the old primary leased again: {ha.views()}")
        assert {b"before", b"acked"} <= drained(again.connect(timeout_s=REPLY_TIMEOUT_S))


def test_a_manager_on_a_fresh_database_takes_over_a_cluster_after_a_failover(
        tmp_path: Path, cluster_of: ClusterOf) -> None:
    with cluster_of(*SERVER_ARGS) as ha:
        ha.servers[0].kill()
        new = poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                         what=lambda: f"a new primary: {ha.views()}")
        ha.manager.kill()  # type: ignore[attr-defined]
        ha.manager.wait(timeout=10)  # type: ignore[attr-defined]
        fresh_dir = tmp_path / "fresh"
        fresh_dir.mkdir()
        with cluster_database(fresh_dir) as fresh_url:
            second = start_manager(tmp_path, ha.addresses, fresh_url, name="manager2")
            try:
                poll_until(lambda: ha.primary(epoch_above=2) is new, timeout_s=FAILOVER_DEADLINE_S,
                           what=lambda: f"the primary leased in epoch 3: {ha.views()}\n"
                                        f"{(tmp_path / 'manager2.log').read_text()}")
                poll_until(lambda: _put(new, "after").startswith(b"200 OK KEY after"),
                           timeout_s=FAILOVER_DEADLINE_S, what=lambda: f"a write: {ha.views()}")
                follower = next(s for s in ha.servers[1:] if s is not new)
                poll_until(lambda: role(follower.connect(timeout_s=REPLY_TIMEOUT_S))[:5:4]
                           == [b"replica", b"3"], timeout_s=FAILOVER_DEADLINE_S)
                record = _record(fresh_url)
            finally:
                second.kill()
                second.wait(timeout=10)
        assert record is not None and record.epoch == 3 and record.primary == new.address
        said = (tmp_path / "manager2.log").read_text()
        assert (f"{new.address} is the primary in epoch 3 (no record in this database; "
                "in sync: yes); found: ") in said, said
        assert f"{new.address} primary epoch 2 lease " in said
        assert f"{ha.servers[0].address} silent" in said
        assert "is silent" not in said  # the primary was leased at once

