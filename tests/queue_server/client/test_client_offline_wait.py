"""offline_wait_s: a request refused with `500 Offline Mode` is tried again for that long
(blocking and asyncio clients, real servers switched OFFLINE and ONLINE)."""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from queue_server.client import QueueClient
from queue_server.client.aio import AsyncQueueClient
from queue_server.protocol.client_errors import OfflineError
from tests.queue_server.client.test_jobs_cli import slotmap
from tests.queue_server.server_proc import ServerProc, raw_command, running_queue_server

FAST = ("--fsync", "never")


def _online_later(server: ServerProc, after_s: float) -> None:
    time.sleep(after_s)  # the point of the test: the put is refused meanwhile
    assert raw_command(server, b"ONLINE") == b"200 OK Switched to Online Mode"


def test_without_offline_wait_the_refusal_is_raised_at_once(tmp_path: Path) -> None:
    with running_queue_server(tmp_path, *FAST) as server:
        assert raw_command(server, b"OFFLINE").startswith(b"200 OK")
        with QueueClient(server.address) as client, pytest.raises(OfflineError):
            client.put("q", b"x")


def test_a_put_refused_while_offline_goes_through_once_online(tmp_path: Path) -> None:
    with running_queue_server(tmp_path, *FAST) as server, ThreadPoolExecutor(1) as pool:
        assert raw_command(server, b"OFFLINE").startswith(b"200 OK")
        switched = pool.submit(_online_later, server, 0.5)
        with QueueClient(server.address, offline_wait_s=20) as client:
            started = time.monotonic()
            client.put("q", b"waited")
            assert time.monotonic() - started >= 0.4
            assert client.total("q").jobs == 1  # stored once, not once per try
        switched.result(timeout=10)


def test_the_wait_ends_with_the_refusal(tmp_path: Path) -> None:
    with running_queue_server(tmp_path, *FAST) as server:
        assert raw_command(server, b"OFFLINE").startswith(b"200 OK")
        with QueueClient(server.address, offline_wait_s=0.6) as client:
            started = time.monotonic()
            with pytest.raises(OfflineError):
                client.put("q", b"x")
            assert time.monotonic() - started >= 0.6


def test_the_asyncio_client_waits_too(tmp_path: Path) -> None:
    async def scenario(server: ServerProc) -> int:
        async with AsyncQueueClient(server.address, offline_wait_s=20) as client:
            online = asyncio.get_running_loop().run_in_executor(None, _online_later, server, 0.5)
            await client.put("q", b"waited")
            await online
            return (await client.total("q")).jobs

    with running_queue_server(tmp_path, *FAST) as server:
        assert raw_command(server, b"OFFLINE").startswith(b"200 OK")
        assert asyncio.run(scenario(server)) == 1


def test_the_shell_says_the_server_is_not_the_primary_and_how_to_name_the_others(tmp_path: Path) -> None:
    # A config naming only the old primary after a failover: the refusal alone left the user guessing.
    with running_queue_server(tmp_path, *FAST) as server:
        assert raw_command(server, b"OFFLINE").startswith(b"200 OK")
        result = slotmap("put", "q", "x", "--server", server.address, "--timeout", "0.5")
        assert result.returncode == 1, result
        assert f"{server.address} is not the primary" in result.stderr
        assert "[queue_server] servers in the config, or one --server each" in result.stderr
