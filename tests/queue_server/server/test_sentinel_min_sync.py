"""The sentinel judges a promotion by the min_sync_replicas the servers enforce, not by the
manager's own config (docs/DESIGN.md "Failover that loses nothing"): three real queue
servers in sync mode started with one value, a real manager whose [queue_server] table
says another, big jobs PUT to the primary, replicas frozen with SIGSTOP, the primary
killed -9.

- Servers 1, manager 2: B lags (frozen) while the primary acknowledges on C's confirmation
  alone, then C is frozen and the primary killed. Only C may hold those jobs: nothing may
  be promoted until it answers. Before the fix the manager counted one silent in-sync
  replica as fewer than its 2 (or, configured async, did not count at all), promoted B,
  and C followed B and dropped them (33 of 43 and 10 of 42 acknowledged jobs lost).
- Servers 2, manager 1: every acknowledged change was confirmed by both replicas, so with
  B frozen C holds everything and is promoted. Before the fix the manager refused ("in-sync
  replica(s) B silent") for as long as B stayed frozen.
- Servers 1 with sync_fallback "async", manager async: both replicas frozen, the primary
  asks to go on alone; it must be recorded and consented to. Before the fix the manager,
  not in sync mode by its config, never consented: the PUT was held (no reply in 10 s).
Each time the mismatch is said: a `queue_settings_mismatch` event and the manager's log."""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from manager.failover import authority
from manager.storage.db import Event
from tests.queue_server.server.ha import cluster_database, frozen
from tests.queue_server.server.ha_cluster import (
    FAILOVER_DEADLINE_S,
    SERVER_ARGS,
    HaCluster,
    linked_replicas,
    managed_cluster,
    start_manager,
)
from tests.queue_server.server.test_failover_lagging_replica import (
    BigProducer,
    check_nothing_lost,
    in_sync_recorded,
    no_promotion_while_c_is_silent,
)
from tests.queue_server.util import poll_until

# sync_timeout_s is 1 s (SERVER_ARGS) and the consent takes 0.25-0.5 s more (DESIGN.md);
# 2.0-2.6 s were measured under load: a reply not in 10 s is not coming.
ALONE_REPLY_S = 10.0


@contextlib.contextmanager
def _cluster(tmp_path: Path, start_queue_server, *, servers: int, manager: Mapping[str, object],  # type: ignore[no-untyped-def]
             server_args: tuple[str, ...] = ()) -> Iterator[HaCluster]:
    """Servers in sync mode started with min_sync_replicas `servers` (their own config
    file), the manager's [queue_server] table saying `manager`."""
    from tests.conftest import QueueServer
    from tests.queue_server import server_proc

    config = tmp_path / "servers.toml"
    config.write_text(f"[queue_server]\nmin_sync_replicas = {servers}\n")
    restarted: list[QueueServer] = []

    def start(*args: str, data_dir: Path | None = None, port: int | None = None):  # type: ignore[no-untyped-def]
        if port is None:
            return start_queue_server(*args, data_dir=data_dir)
        again = QueueServer.of(server_proc.start_queue_server(tmp_path, *args, data_dir=data_dir, port=port))
        restarted.append(again)
        return again

    try:
        with cluster_database(tmp_path) as url, managed_cluster(
                tmp_path, url, start, server_args=(*SERVER_ARGS, *server_args, "--config", str(config)),
                manager_settings=manager) as cluster:
            yield cluster
    finally:
        for server in restarted:
            server.kill()


def _promoted_or_refused(ha: HaCluster, refusal: str) -> Event:
    return poll_until(
        lambda: ha.events("queue_server_promoted") or [
            e for e in ha.events("queue_promotion_refused") if refusal in e.message],
        timeout_s=FAILOVER_DEADLINE_S, what=lambda: f"a promotion or its refusal: {ha.views()}")[0]


def _mismatch_said(ha: HaCluster, words: str) -> None:
    said = poll_until(lambda: ha.events("queue_settings_mismatch"), timeout_s=FAILOVER_DEADLINE_S,
                      what="a queue_settings_mismatch event")
    assert "min_sync_replicas" in said[0].message and words in said[0].message, said[0].message
    assert words in (ha.root / "manager.log").read_text()


def _stop(producer: BigProducer, threads: list[threading.Thread]) -> None:
    producer.stop.set()
    for thread in threads:
        thread.join(FAILOVER_DEADLINE_S)


@pytest.mark.parametrize(("manager", "said"), [
    ({"min_sync_replicas": 2}, "the queue servers enforce 1, the manager's config says 2"),
    ({"replicate": "async"}, "the queue servers enforce 1, the manager's config says async"),
], ids=["manager-min-sync-2", "manager-async"])
def test_a_manager_configured_for_more_confirmations_does_not_promote_a_replica_lacking_writes(  # type: ignore[no-untyped-def]
        tmp_path: Path, start_queue_server, manager: dict[str, object], said: str) -> None:
    with _cluster(tmp_path, start_queue_server, servers=1, manager=manager) as ha:
        _mismatch_said(ha, said)
        no_promotion_while_c_is_silent(ha)


def test_a_manager_configured_for_fewer_confirmations_promotes_the_replica_that_has_them(  # type: ignore[no-untyped-def]
        tmp_path: Path, start_queue_server) -> None:
    with _cluster(tmp_path, start_queue_server, servers=2, manager={"min_sync_replicas": 1}) as ha:
        a, b, _c = ha.servers
        _mismatch_said(ha, "the queue servers enforce 2, the manager's config says 1")
        producer = BigProducer(a.port)
        threads = producer.start()
        try:
            poll_until(lambda: in_sync_recorded(ha.database_url) == 2, timeout_s=FAILOVER_DEADLINE_S,
                       what=lambda: f"both replicas recorded in sync: {ha.views()}")
            poll_until(lambda: len(producer.acked) >= 5, timeout_s=FAILOVER_DEADLINE_S, what="writes")
            with frozen(b):
                a.kill()
                said = _promoted_or_refused(ha, "silent: a change")
                assert said.kind == "queue_server_promoted", (
                    f"refused although every acknowledged change was confirmed by the answering "
                    f"replica too: {said.message}")
        finally:
            _stop(producer, threads)
        ha.restart(a)  # two replicas again: the new primary acknowledges (and hands out) again
        check_nothing_lost(ha, producer)


def test_a_manager_configured_async_still_lets_a_sync_primary_go_on_alone_once_recorded(  # type: ignore[no-untyped-def]
        tmp_path: Path, start_queue_server) -> None:
    """Servers in sync mode with sync_fallback "async", the manager's config async: with both
    replicas frozen the primary asks to go on alone, and the manager must record that no
    replica is in sync and consent. Before the fix it recorded nothing (not sync mode as
    far as its config went) and never consented: the PUT was held for as long as the
    replicas stayed frozen."""
    with _cluster(tmp_path, start_queue_server, servers=1, manager={"replicate": "async"},
                  server_args=("--sync-fallback", "async")) as ha:
        primary, replicas = ha.servers[0], ha.servers[1:]
        poll_until(lambda: linked_replicas(primary) == 2, timeout_s=FAILOVER_DEADLINE_S,
                   what=lambda: f"both replicas in sync: {ha.views()}")
        with frozen(replicas[0]), frozen(replicas[1]):
            conn = primary.connect(timeout_s=ALONE_REPLY_S)
            sent = time.monotonic()
            conn.send(b"PUT q 0 5\r\nalone")
            assert conn.line() == b"200 OK", "the PUT was not acknowledged"
            print(f"acknowledged alone {time.monotonic() - sent:.2f} s after the PUT")
            engine = create_engine(ha.database_url)
            try:
                record = authority.read(engine)
            finally:
                engine.dispose()
            assert record is not None and not record.in_sync and record.min_sync_replicas == 1, record


def test_a_server_not_started_for_managed_failover_is_reported(  # type: ignore[no-untyped-def]
        tmp_path: Path, start_queue_server) -> None:
    """The manager's config says managed_failover, one server was started without
    --managed: it refuses FOLLOW and PROMOTE and would promote itself. Before, the
    sentinel's FOLLOW got 403 at every turn and nothing was said."""
    primary = start_queue_server(*SERVER_ARGS)
    loose = start_queue_server("--replicate", "sync", "--replica-of", primary.address,
                               "--server-id", "2", "--promote-after", "600")
    with cluster_database(tmp_path) as url:
        manager = start_manager(tmp_path, [primary.address, loose.address], url)
        try:
            ha = HaCluster(tmp_path, start_queue_server, [primary, loose], manager, url)
            said = poll_until(lambda: ha.events("queue_settings_mismatch"), timeout_s=FAILOVER_DEADLINE_S,
                              what=lambda: f"a queue_settings_mismatch event: {ha.views()}")
            assert said[0].message.startswith(f"{loose.address} not started for managed failover"), \
                said[0].message
        finally:
            manager.kill()
            manager.wait(timeout=10)
