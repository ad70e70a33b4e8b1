"""Helpers for the failover tests: producers that remember what was acknowledged, a
server's whole content drained, ROLE, freezing a process, a call run in a thread. Real
processes and sockets."""
from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from tests.queue_server.util import read_batch

PRODUCER_TIMEOUT_S = 10.0
# drained() takes jobs in batches: one GET per job cost a sync-replicated round trip each
# (58 s for the 17,667 jobs of ten failovers on a loaded 2-core box).
DRAIN_BATCH = 1000


def role(conn) -> list[bytes]:  # type: ignore[no-untyped-def]
    conn.send(b"ROLE\r\n")
    reply = conn.line().split()
    assert reply[:2] == [b"200", b"OK"], reply
    return reply[2:]


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """`call` run in a daemon thread: its thread, and then `value` or `error`, and `seconds`."""
    out: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            out["value"] = call()
        except Exception as exc:  # the test reports it: noqa: BLE001
            out["error"] = exc
        out["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


@contextlib.contextmanager
def frozen(server) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """SIGSTOP the server's process for the block (SIGCONT even when the block fails)."""
    server.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGCONT)


@dataclass
class _ProducerThread:
    """A producer's thread: `start()` runs `_run` until `finish()` sets `stop`; a producer
    still running `join_s` later fails the test as hung."""

    name: str
    stop: threading.Event = field(default_factory=threading.Event, kw_only=True)
    thread: threading.Thread | None = field(default=None, kw_only=True)
    join_s: ClassVar[float]

    def start(self) -> Self:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(self.join_s)
        assert not self.thread.is_alive(), f"producer {self.name} hung"

    def _run(self) -> None:
        raise NotImplementedError


@dataclass
class Producer(_ProducerThread):
    """A thread PUTting numbered jobs (`<name>-<n>`) one at a time on its own connection,
    moving to the next address when refused or cut; `acked` holds what got `200 OK`."""

    addresses: list[tuple[str, int]]
    queue: str = "q"
    acked: list[bytes] = field(default_factory=list)
    # (port, monotonic time) of each acknowledgement, in order
    acked_at: list[tuple[int, float]] = field(default_factory=list)
    refused: int = 0
    # How long a reply may take before the producer moves on (at most PRODUCER_TIMEOUT_S).
    timeout_s: float = PRODUCER_TIMEOUT_S
    join_s: ClassVar[float] = PRODUCER_TIMEOUT_S + 5

    def _run(self) -> None:
        number = 0
        target = 0
        while not self.stop.is_set():
            address = self.addresses[target % len(self.addresses)]
            try:
                with socket.create_connection(address, timeout=self.timeout_s) as sock:
                    reader = sock.makefile("rb")
                    while not self.stop.is_set():
                        data = f"{self.name}-{number}".encode()
                        sock.sendall(b"PUT %s 0 %d\r\n%s" % (self.queue.encode(), len(data), data))
                        line = reader.readline()
                        if line == b"200 OK\r\n":
                            self.acked.append(data)
                            self.acked_at.append((address[1], time.monotonic()))
                            number += 1
                        elif not line:
                            raise ConnectionError("closed")
                        else:
                            self.refused += 1
                            number += 1  # may be on the server all the same: never reused
                            break
            except OSError:
                number += 1  # the last one may or may not have been applied
            target += 1
            self.stop.wait(0.05)


def drained(conn, queue: str = "q") -> set[bytes]:  # type: ignore[no-untyped-def]
    """Every ready job of `queue` on the server (taken with GET ... COUNT, each kept running)."""
    found: set[bytes] = set()
    while True:
        conn.send(f"GET {queue} COUNT {DRAIN_BATCH}\r\n".encode())
        batch = read_batch(conn)
        if not batch:
            return found
        found.update(job.data for job in batch)


def ready_keys(server, queue: str = "q") -> set[bytes]:  # type: ignore[no-untyped-def]
    """The keys of every ready job on `server`, listed read-only (JOBS, a page of 1000 at a
    time). Not drained(): a GET changes the server, and a turn with changes is cut unanswered
    when the lease has just lapsed (a machine loaded past its cores starved the manager so:
    the drain after ten failovers got a closed connection)."""
    from queue_server.client import QueueClient

    keys: set[bytes] = set()
    after = None
    with QueueClient([server.address], timeout_s=10.0) as client:
        while True:
            page = client.jobs(queue, "ready", limit=1000, after=after)
            keys.update(job.key.encode() for job in page)
            if len(page) < 1000:
                return keys
            after = page[-1].key


@dataclass
class KeyedProducer(_ProducerThread):
    """A thread PUTting jobs with its own keys through QueueClient (issue 17, F): the
    client finds the primary by ROLE, waits out `500 Offline Mode` and retries a keyed PUT
    whose connection was lost. `acked` holds the keys it was told were stored."""

    servers: list[str]
    acked: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    join_s: ClassVar[float] = PRODUCER_TIMEOUT_S * 3

    def _run(self) -> None:
        from queue_server.client import QueueClient
        from queue_server.protocol.client_errors import QueueServerError

        number = 0
        with QueueClient(self.servers, timeout_s=PRODUCER_TIMEOUT_S, connect_timeout_s=1.0,
                         reconnect_attempts=20, offline_wait_s=PRODUCER_TIMEOUT_S) as client:
            while not self.stop.is_set():
                key = f"{self.name}-{number}"
                number += 1
                try:
                    client.put("q", key.encode(), key=key)
                except (QueueServerError, OSError) as exc:
                    self.failed.append(f"{key}: {exc}")
                    self.stop.wait(0.1)
                else:
                    self.acked.append(key)


@contextlib.contextmanager
def cluster_database(tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """SQLite in tmp_path; PostgreSQL when SLOTMAP_TEST_PG is set, in a schema of its own
    (the manager's lock and the authority row are per schema), dropped at the end."""
    import os

    from procs import pg_schema

    dsn = os.environ.get("SLOTMAP_TEST_PG")
    if not dsn:
        yield f"sqlite:///{tmp_path / 'slotmap.db'}"
        return
    with pg_schema(dsn, "slotmap_ha") as url:
        yield url
