"""client.result(timeout=...) through a restart, a refusal and a failover (real servers):
the wait goes on, on the primary found anew, within its own timeout; never longer."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from queue_server.client import JobNotFinished, QueueClient
from tests.queue_server.server_proc import raw_command, running_queue_server, start_queue_server

FAST = ("--fsync", "never")


def _finish(address: str, queue: str, result: str) -> None:
    with QueueClient(address) as worker:
        [job] = worker.get(queue, keys=True)
        assert worker.done_with_result(job.id, result).found


def test_a_result_wait_goes_on_through_a_kill_and_restart_of_its_server(tmp_path: Path) -> None:
    # Before: the reconnect rule tried twice within ~0.2 s, while a restart takes ~1 s, and
    # result(timeout=30) raised ServerUnreachable.
    data_dir = tmp_path / "data"
    server = start_queue_server(tmp_path, "--fsync", "always", data_dir=data_dir)
    try:
        with QueueClient(server.address) as client, ThreadPoolExecutor(1) as pool:
            client.put("q", b"x", key="r1")
            waiting = pool.submit(client.result, "q", "r1", timeout=30)
            server.kill()
            server = start_queue_server(tmp_path, "--fsync", "always", data_dir=data_dir, port=server.port)
            _finish(server.address, "q", "after the restart")
            assert waiting.result(timeout=30) == "after the restart"
    finally:
        server.kill()


def test_a_result_wait_refused_offline_goes_on_once_its_server_is_online(tmp_path: Path) -> None:
    # Before: the server's OFFLINE answered the blocked RESULT with 500 Offline Mode and
    # result(timeout=30) raised OfflineError at once.
    with running_queue_server(tmp_path, *FAST) as server, QueueClient(server.address) as client, \
            ThreadPoolExecutor(1) as pool:
        client.put("q", b"x", key="r2")
        assert client.finished("q", "r2").state == "ready"  # type: ignore[union-attr]
        waiting = pool.submit(client.result, "q", "r2", timeout=30)
        assert raw_command(server, b"OFFLINE").startswith(b"200 OK")
        time.sleep(0.5)  # the point of the test: the wait is refused meanwhile
        assert raw_command(server, b"ONLINE") == b"200 OK Switched to Online Mode"
        _finish(server.address, "q", "once online")
        assert waiting.result(timeout=30) == "once online"


def test_a_result_wait_cut_by_a_failover_ends_within_its_own_timeout(tmp_path: Path) -> None:
    # Before: the reconnect rule sent the same RESULT ... TIMEOUT 4 again to the replica,
    # and result(timeout=4) cut at 2.5 s raised JobNotFinished after 6.5 s.
    with running_queue_server(tmp_path, *FAST, "--server-id", "1") as primary, \
            running_queue_server(tmp_path, *FAST, "--server-id", "2", "--replica-of", primary.address,
                                 "--promote-after", "60") as replica, \
            QueueClient(f"{primary.address},{replica.address}") as client, ThreadPoolExecutor(1) as pool:
        client.put("q", b"x", key="r3")
        started = time.monotonic()
        waiting = pool.submit(client.result, "q", "r3", timeout=4.0)
        time.sleep(2.5)  # the point of the test: the primary dies late in the wait
        primary.kill()
        with pytest.raises(JobNotFinished):
            waiting.result(timeout=30)
        assert time.monotonic() - started < 4.0 + 1.0
