"""A replica fed a record it cannot apply says so loudly (ERROR with the record, INFO's
replication_errors) and resyncs from a full snapshot: afterwards its state is the
primary's, byte for byte. A real primary and replica; between them a TCP relay that
forwards faithfully and can slip in one record, as a lying or newer primary would."""
from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from queue_server.server.snapshot import HEADER
from tests.queue_server.server_proc import HOST
from tests.queue_server.util import poll_until, put_ok

SYNC_S = 30.0  # a busy CI machine


class Relay:
    """replica <-> primary, one link at a time; `inject` sends bytes to the replica as if
    they came from the primary (only while the primary is idle: between two records)."""

    def __init__(self, primary_port: int) -> None:
        self.primary_port = primary_port
        self.listener = socket.create_server((HOST, 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.links = 0
        self.spoil_snapshots = False  # while set: each snapshot's version is one it cannot read
        self._to_replica: socket.socket | None = None
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self._start(self._accept)

    def _start(self, target, *args) -> None:  # type: ignore[no-untyped-def]
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                replica, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            primary = socket.create_connection((HOST, self.primary_port), timeout=5.0)
            primary.settimeout(None)
            with self._lock:
                self._sockets += [replica, primary]
                self._to_replica = replica
                self.links += 1
            self._start(self._pump, replica, primary, False)
            self._start(self._pump, primary, replica, True)

    def _pump(self, source: socket.socket, sink: socket.socket, to_replica: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if to_replica:
                    if self.spoil_snapshots:  # same length: only the version changes
                        chunk = chunk.replace(HEADER.rstrip(), b"SLOTMAP-SNAPSHOT 9")
                    with self._lock:
                        sink.sendall(chunk)
                else:
                    sink.sendall(chunk)
        except OSError:
            pass  # one side closed: the relay closes the other below
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed

    def inject(self, data: bytes) -> None:
        with self._lock:
            assert self._to_replica is not None
            self._to_replica.sendall(data)

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes its pump's recv (close does not)
                except OSError:
                    pass  # already shut by its pump
                sock.close()
        for thread in self._threads:
            thread.join(timeout=5.0)


@pytest.fixture
def relay_to(request) -> Iterator:  # type: ignore[no-untyped-def]
    relays: list[Relay] = []

    def make(primary_port: int) -> Relay:
        relays.append(Relay(primary_port))
        return relays[-1]

    yield make
    for relay in relays:
        relay.close()


def _block_reply(server, command: bytes) -> bytes:  # type: ignore[no-untyped-def]
    client = server.connect()
    head = client.request(command)
    assert head.startswith(b"200 OK "), head
    data = client.exact(int(head.split()[2]))
    client.close()
    return data


def _info(server) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return json.loads(_block_reply(server, b"INFO"))


@pytest.mark.parametrize("record, shown", [
    (b"SYNC FAIL 424242 AT 1700000000.0 DEAD 5\r\nerror", "SyncFail(job_id=424242"),  # no such job
    (b"SYNC NOSUCH 1 2 3\r\n", "SYNC NOSUCH"),  # a record of a newer version
])
def test_a_replica_that_cannot_apply_a_record_logs_error_counts_it_and_resyncs_to_the_primary(
        start_queue_server, relay_to, record, shown):  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    relay = relay_to(primary.port)
    replica = start_queue_server("--fsync", "never", "--server-id", "2",
                                 "--replica-of", f"{HOST}:{relay.port}")
    producer = primary.connect()
    for n in range(10):
        put_ok(producer, "q", n % 3, b"before %d" % n)
    poll_until(lambda: replica.connect().request(b"TOTAL q") == producer.request(b"TOTAL q"),
               SYNC_S, what="the replica follows")

    relay.inject(record)
    info = poll_until(lambda: (i := _info(replica))["replication_resyncs"] >= 1 and i, SYNC_S,
                      what=lambda: f"a resync; replica output:\n{replica.output_text()}")
    assert info["replication_errors"] == 1 and shown in info["last_replication_error"]
    assert info["following"] is True
    output = replica.output_text()
    assert " ERROR replication: cannot apply what the primary sent" in output and shown in output
    assert relay.links >= 2  # a new link: a full snapshot
    # The dashboard's queue-servers table (and /metrics) show it, not only the log.
    from admin_ui.queue_roles import read_role

    shown_role = read_role(replica.address, None)
    assert shown_role.replication_errors == 1 and shown in (shown_role.last_replication_error or "")

    for n in range(5):
        put_ok(producer, "r", 0, b"after %d" % n)
    poll_until(lambda: _block_reply(replica, b"SNAPSHOT") == _block_reply(primary, b"SNAPSHOT"),
               SYNC_S, what="the replica's state is the primary's")
    assert _info(replica)["replication_errors"] == 1  # one failure, one resync: no loop


def test_a_replica_whose_snapshots_keep_failing_backs_off_then_resyncs_when_they_apply(
        start_queue_server, relay_to):  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    relay = relay_to(primary.port)
    relay.spoil_snapshots = True
    put_ok(primary.connect(), "q", 0, b"job")
    replica = start_queue_server("--fsync", "never", "--server-id", "2",
                                 "--replica-of", f"{HOST}:{relay.port}")
    poll_until(lambda: _info(replica)["replication_errors"] >= 1, SYNC_S, what="a first failure")
    first = time.monotonic()
    poll_until(lambda: _info(replica)["replication_errors"] >= 4, SYNC_S, what="three more")
    # 0.5 + 1 + 2 s between them (a fixed 0.5 s: 1.5 s), less a margin for scheduling
    assert time.monotonic() - first >= 3.0
    assert "not a slotmap snapshot" in _info(replica)["last_replication_error"]
    assert "next try in 2.0 s" in replica.output_text()
    relay.spoil_snapshots = False
    poll_until(lambda: _block_reply(replica, b"SNAPSHOT") == _block_reply(primary, b"SNAPSHOT"),
               SYNC_S, what="the replica's state is the primary's once a snapshot applies")
