"""Which replica is promoted when the one that lagged answers too (issue 25 audit, a
replica that lagged): three real queue servers in sync mode (min_sync_replicas 1), a real
manager as sentinel, big jobs PUT to the primary. Replica B is frozen for a moment (still
listed in sync: under the liveness limit) while the primary acknowledges jobs on C's
confirmation alone; then the primary is killed -9 and B thawed.

- Both replicas answer: C, the furthest along, must be promoted. Before the fix a replica
  whose link to the dead primary was lost said position 0 in ROLE, so both said 0 and the
  first listed, B, was promoted without those jobs; C followed it and dropped them (31 of
  41 acknowledged jobs lost).
- C frozen at the promotion too: nothing may be promoted until C answers (a change
  acknowledged on C's confirmation alone may be on C alone). Before the fix B was promoted
  (207 acknowledged jobs lost in one run)."""
from __future__ import annotations

import signal
import socket
import threading
from dataclasses import dataclass, field

from sqlalchemy import create_engine

from manager.failover import authority
from tests.queue_server.server.ha import role
from tests.queue_server.server.ha_cluster import FAILOVER_DEADLINE_S, HaCluster
from tests.queue_server.server.test_managed_failover import ha  # noqa: F401  (the fixture)
from tests.queue_server.util import poll_until

BLOB = b"x" * (256 * 1024)  # big jobs: the frozen replica's socket buffers fill, it falls behind
LIST_PAGE = 200  # JOBS rows per page (each job's data cut at 1 KiB)


@dataclass
class BigProducer:
    """Threads PUTting big keyed-by-data jobs to one server; `acked` holds what got 200 OK."""

    port: int
    acked: list[bytes] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self, threads: int = 4) -> list[threading.Thread]:
        started = [threading.Thread(target=self._run, args=(f"p{n}",), daemon=True) for n in range(threads)]
        for thread in started:
            thread.start()
        return started

    def _run(self, name: str) -> None:
        number = 0
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=FAILOVER_DEADLINE_S) as sock:
                reader = sock.makefile("rb")
                while not self.stop.is_set():
                    data = f"{name}-{number} ".encode() + BLOB
                    sock.sendall(b"PUT q 0 %d\r\n%s" % (len(data), data))
                    if reader.readline() != b"200 OK\r\n":
                        return
                    self.acked.append(data.split(b" ", 1)[0])
                    number += 1
        except OSError:
            return  # the primary killed: the last PUT was not acknowledged


def in_sync_recorded(url: str) -> int:
    engine = create_engine(url)
    try:
        record = authority.read(engine)
    finally:
        engine.dispose()
    return 0 if record is None else len(record.sync_replicas)


def keys_on(server) -> set[bytes]:  # type: ignore[no-untyped-def]
    """The producer's keys (each job's data starts with its own) of the jobs ready on
    `server`, listed read-only (JOBS): a GET changes the server, so it needs a lease and
    the replicas min_sync_replicas asks for, and right after the restart that ends a
    scenario it was answered `500 Offline Mode` under load."""
    from queue_server.client import QueueClient

    found: set[bytes] = set()
    after = at = None
    with QueueClient([server.address], timeout_s=FAILOVER_DEADLINE_S) as client:
        while True:
            page = client.jobs("q", "ready", limit=LIST_PAGE, after=after, at=at)
            found.update(job.data.split(" ", 1)[0].encode() for job in page)
            if len(page) < LIST_PAGE:
                return found
            after, at = page[-1].key, page[-1].position


def lag_b_while_c_confirms(cluster: HaCluster, producer: BigProducer) -> None:
    """B frozen while the primary acknowledges on C's confirmation; returns with B still
    frozen and still listed in sync (the caller kills the primary and thaws B)."""
    a, b, _c = cluster.servers
    poll_until(lambda: in_sync_recorded(cluster.database_url) == 2, timeout_s=FAILOVER_DEADLINE_S,
               what=lambda: f"both replicas recorded in sync: {cluster.views()}")
    poll_until(lambda: len(producer.acked) >= 5, timeout_s=FAILOVER_DEADLINE_S, what="writes")
    b.process.send_signal(signal.SIGSTOP)
    before = len(producer.acked)
    poll_until(lambda: len(producer.acked) >= before + 30, timeout_s=FAILOVER_DEADLINE_S,
               interval_s=0.005, what="writes confirmed by C alone")
    in_sync = role(a.connect(timeout_s=FAILOVER_DEADLINE_S))[6].split(b",")
    assert len(in_sync) == 2, f"B no longer listed in sync: the scenario was too slow ({in_sync})"


def check_nothing_lost(cluster: HaCluster, producer: BigProducer) -> None:
    new = poll_until(lambda: cluster.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                     what=lambda: f"a new primary: {cluster.views()}")
    lost = set(producer.acked) - keys_on(new)
    assert not lost, (f"{len(lost)} of {len(producer.acked)} acknowledged jobs lost "
                      f"(promoted: {new.address}, the lagging one: {cluster.servers[1].address})")


def test_the_furthest_replica_is_promoted_not_the_one_that_lagged(ha: HaCluster) -> None:  # noqa: F811
    a, b, _c = ha.servers
    producer = BigProducer(a.port)
    threads = producer.start()
    try:
        try:
            lag_b_while_c_confirms(ha, producer)
            a.kill()
        finally:
            b.process.send_signal(signal.SIGCONT)
    finally:
        producer.stop.set()
        for thread in threads:
            thread.join(FAILOVER_DEADLINE_S)
    check_nothing_lost(ha, producer)


def test_no_promotion_while_an_in_sync_replica_is_silent(ha: HaCluster) -> None:  # noqa: F811
    no_promotion_while_c_is_silent(ha)


def no_promotion_while_c_is_silent(cluster: HaCluster) -> None:
    """B lags while C confirms, C frozen, the primary killed, B thawed: nothing promoted
    until C answers, and then every acknowledged job is on the new primary."""
    a, b, c = cluster.servers
    producer = BigProducer(a.port)
    threads = producer.start()
    try:
        try:
            lag_b_while_c_confirms(cluster, producer)
            c.process.send_signal(signal.SIGSTOP)
            a.kill()
        finally:
            b.process.send_signal(signal.SIGCONT)
        producer.stop.set()
        try:
            said = poll_until(
                lambda: cluster.events("queue_server_promoted") or [
                    e for e in cluster.events("queue_promotion_refused") if "silent: a change" in e.message],
                timeout_s=FAILOVER_DEADLINE_S, what=lambda: f"a promotion or its refusal: {cluster.views()}")
            assert said[0].kind == "queue_promotion_refused", (
                f"promoted while in-sync replica C was silent: {said[0].message}")
        finally:
            c.process.send_signal(signal.SIGCONT)
    finally:
        producer.stop.set()
        for thread in threads:
            thread.join(FAILOVER_DEADLINE_S)
    check_nothing_lost(cluster, producer)
