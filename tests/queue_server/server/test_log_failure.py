"""A log that cannot be written: nothing unwritten is acknowledged, the server stops, and a
restart recovers exactly the acknowledged jobs.

The fault is real: the server runs under RLIMIT_FSIZE, so once its log reaches the limit
write(2) fails with EFBIG, as it would with ENOSPC on a full disk.
"""
from __future__ import annotations

import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import HOST, RawClient, free_port, slotmap_command
from tests.queue_server.util import poll_until, total

FILE_SIZE_LIMIT = 384 * 1024
BLOCK = b"j" * 32 * 1024
EXIT_S = 15.0


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=EXIT_S)


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def _start(processes: list[subprocess.Popen[bytes]], data_dir: Path, fsync: str, log: Path,
           *, limited: bool) -> tuple[subprocess.Popen[bytes], RawClient]:
    port = free_port()
    command = [*slotmap_command(), "queue-server", "--listen", f"{HOST}:{port}",
               "--data-dir", str(data_dir), "--fsync", fsync]
    with open(log, "wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                   preexec_fn=_limit_file_size if limited else None)
    processes.append(process)

    def connect() -> RawClient | None:
        if process.poll() is not None:
            raise AssertionError(f"server exited at start: {log.read_text()}")
        try:
            return RawClient(HOST, port)
        except OSError:
            return None

    return process, poll_until(connect, timeout_s=EXIT_S)


@pytest.mark.parametrize("fsync", ["always", "never"])
def test_failed_log_write_acknowledges_nothing_and_stops(
        tmp_path: Path, processes: list[subprocess.Popen[bytes]], fsync: str) -> None:
    data_dir = tmp_path / "data"
    process, client = _start(processes, data_dir, fsync, tmp_path / "limited.log", limited=True)
    acknowledged = 0
    for _ in range(FILE_SIZE_LIMIT // len(BLOCK) + 4):
        try:
            client.send(b"PUT q 0 %d\r\n" % len(BLOCK) + BLOCK)
            reply = client.line()
        except (AssertionError, BrokenPipeError, ConnectionResetError):
            break  # cut off without a reply
        assert reply == b"200 OK"
        acknowledged += 1
    else:
        pytest.fail("the log never reached its size limit")
    assert client.eof, "the server neither answered nor closed the connection"
    assert process.wait(timeout=EXIT_S) == 2
    output = (tmp_path / "limited.log").read_text()
    assert "the log could not be written or synced" in output
    assert "restart to recover" in output
    assert 0 < acknowledged < FILE_SIZE_LIMIT // len(BLOCK)

    _, client = _start(processes, data_dir, fsync, tmp_path / "restarted.log", limited=False)
    assert total(client, "q")[2] == acknowledged  # the torn last frame was not acknowledged
