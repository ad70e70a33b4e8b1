"""Durability cannot switch itself off: out of file descriptors when a snapshot is due, the
server logs it, keeps syncing and acknowledging, reaps every snapshot child, and snapshots
again once descriptors are back; no acknowledged job is lost.

The fault is real: the server's RLIMIT_NOFILE is lowered (prlimit) to exactly the
descriptors it holds, with 100 idle connections open, so the next open() fails with EMFILE.
"""
from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path

import psutil
from hostile import served
from polling import DEADLINE_S

from tests.conftest import HOST, QueueServer, RawClient, free_port, slotmap_command
from tests.queue_server.util import poll_until, total

CONFIG = "[queue_server]\nsnapshot_log_bytes = 4096\nfsync = \"everysec\"\n"
IDLE_CONNECTIONS = 100
JOB = b"j" * 200


def _fds(pid: int) -> set[int]:
    return {int(name) for name in os.listdir(f"/proc/{pid}/fd")}


def _no_new_descriptor(pid: int) -> None:
    """Soft RLIMIT_NOFILE = the lowest free descriptor number: the next open() fails."""
    held = _fds(pid)
    lowest_free = min(set(range(max(held) + 2)) - held)
    _, hard = psutil.Process(pid).rlimit(resource.RLIMIT_NOFILE)
    psutil.Process(pid).rlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))


def _snapshots(data_dir: Path) -> set[str]:
    return {path.name for path in data_dir.glob("snapshot-*.snap")}


def _zombies(pid: int) -> list[int]:
    zombies = []
    for child in psutil.Process(pid).children():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                zombies.append(child.pid)
        except psutil.NoSuchProcess:  # reaped between the listing and the look: not a zombie
            continue
    return zombies


def _put_all(client: RawClient, first: int, count: int) -> None:
    client.send(b"".join(b"PUT durable 0 %d\r\n" % len(JOB) + JOB for _ in range(count)))
    client.expect(b"200 OK\r\n" * count)


def test_out_of_descriptors_at_snapshot_time_logs_retries_and_loses_nothing(start_queue_server, tmp_path):
    server = start_queue_server(config=CONFIG)
    pid = server.process.pid
    idle = [server.connect() for _ in range(IDLE_CONNECTIONS)]
    producer = server.connect(timeout_s=15.0)
    assert producer.request(b"PING") == b"200 PONG"
    original = psutil.Process(pid).rlimit(resource.RLIMIT_NOFILE)
    before = _snapshots(server.data_dir)

    _no_new_descriptor(pid)
    acknowledged = 0
    for _ in range(10):  # each batch outgrows snapshot_log_bytes
        _put_all(producer, acknowledged, 40)
        acknowledged += 40
    poll_until(lambda: "could not start" in server.output_text(), timeout_s=DEADLINE_S,
               what="the failed snapshot logged")
    _put_all(producer, acknowledged, 40)  # still acknowledged, still logged
    acknowledged += 40
    assert _snapshots(server.data_dir) == before
    assert server.is_running()
    assert not _zombies(pid)

    psutil.Process(pid).rlimit(resource.RLIMIT_NOFILE, original)
    _put_all(producer, acknowledged, 40)
    acknowledged += 40
    poll_until(lambda: _snapshots(server.data_dir) - before, timeout_s=DEADLINE_S,
               what="a snapshot once descriptors are back")
    poll_until(lambda: not _zombies(pid) and "being written" in server.output_text(),
               timeout_s=DEADLINE_S, what="the snapshot child reaped")
    assert "housekeeping" not in server.output_text()  # no step failed with a traceback

    for client in idle:
        client.close()
    server.kill()
    restarted = start_queue_server(config=CONFIG, data_dir=server.data_dir)
    checker = restarted.connect()
    assert total(checker, "durable") == (1, 1, acknowledged, 0)


def _start_limited(tmp_path: Path, nofile: int) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = free_port()
    log_path = tmp_path / "limited.log"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*slotmap_command(), "queue-server", "--listen", f"{HOST}:{port}",
             "--data-dir", str(tmp_path / "data")],
            stdout=log, stderr=subprocess.STDOUT, env=env,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile)),
        )
    return process, port, log_path


def _replies_once_quiet(clients: list[RawClient], quiet_s: float = 0.3) -> list[bytes]:
    """What each client received, read from all of them until none received anything for
    `quiet_s` (not one client after the other, `quiet_s` each: 10 s for the accepted ones)."""
    replies = [b""] * len(clients)
    quiet_since = time.monotonic()
    deadline = quiet_since + DEADLINE_S
    while time.monotonic() - quiet_since < quiet_s:
        assert time.monotonic() < deadline, f"clients still receiving after {DEADLINE_S} s"
        for index, client in enumerate(clients):
            if data := client.pending(wait_s=0.001):
                replies[index] += data
                quiet_since = time.monotonic()
    return replies


def test_under_a_low_open_file_limit_max_clients_shrinks_to_fit_and_extra_clients_are_refused(tmp_path):
    process, port, log_path = _start_limited(tmp_path, 64)
    try:
        server = QueueServer(HOST, port, process, tmp_path / "data", log_path)
        poll_until(lambda: "listening on" in log_path.read_text() or process.poll() is not None,
                   timeout_s=DEADLINE_S, what="the server up")
        assert process.poll() is None
        clients = [RawClient(HOST, port) for _ in range(IDLE_CONNECTIONS)]
        replies = _replies_once_quiet(clients)
        refused = replies.count(b"503 Too Many Clients\r\n")
        assert refused >= IDLE_CONNECTIONS - 32
        assert refused + replies.count(b"") == IDLE_CONNECTIONS
        assert "max_clients is 32" in log_path.read_text()
        for client in clients:
            client.close()
        poll_until(lambda: served(server), what="served once the idle clients left")
    finally:
        process.kill()
        process.wait(timeout=10)
