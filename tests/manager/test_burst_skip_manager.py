"""The manager's burst check with a queue that has jobs and no slot, and nothing to take (no
master yet: no capacity at all): the check finds the burst at every turn and makes no burst plan.
Before, each check planned (5.6 s CPU per check at 10,000 queues, bench/burst_check_cost.py)."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from polling import DEADLINE_S, poll_until
from test_service_procs import server_proc

from config.models import ClusterConfig, ManagerConfig, QueueConfig
from manager.failover.leader import NoLease
from manager.hosts.link import ManagerSocket
from manager.planning import burst
from manager.planning.plan_inputs import QueueStatsReader
from manager.service import Manager
from manager.storage.store import Store
from queue_server.client import QueueClient
from tests.conftest import free_port

CHECKS = 5  # burst checks seen finding the queue before the count is read


def test_a_burst_check_with_nothing_to_take_makes_no_burst_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = server_proc.start_queue_server(tmp_path, "--fsync", "never")
    client = QueueClient(server.address, timeout_s=2.0)
    client.put_many("waiting", [b"x"] * 50)
    found: list[list[str]] = []
    planned: list[list[str]] = []
    real_bursting, real_plan_burst = burst.bursting, burst.plan_burst

    def counted_bursting(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real_bursting(*args, **kwargs)
        found.append(result)
        return result

    def counted_plan_burst(current, queues, stats, hosts, bursts, **kwargs):  # type: ignore[no-untyped-def]
        planned.append(list(bursts))
        return real_plan_burst(current, queues, stats, hosts, bursts, **kwargs)

    # The real functions, counted: the manager calls them through the module.
    monkeypatch.setattr(burst, "bursting", counted_bursting)
    monkeypatch.setattr(burst, "plan_burst", counted_plan_burst)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    # Full plans 60 s apart: only burst checks run after the first.
    config = ClusterConfig(
        queues={"waiting": QueueConfig(priority=5, min_slots=0, max_slots=4)},
        manager=ManagerConfig(listen=endpoint, heartbeat_interval_s=0.05, burst_check_s=0.05,
                              plan_interval_s=60.0),
    )
    store = Store.open(f"sqlite:///{tmp_path / 'history.db'}")
    socket = ManagerSocket(endpoint)
    manager = Manager(config, store=store, socket=socket, stats_reader=QueueStatsReader(client),
                      lease=NoLease())
    thread = threading.Thread(target=manager.run, daemon=True)
    thread.start()
    try:
        poll_until(lambda: sum(1 for f in found if f == ["waiting"]) >= CHECKS or not thread.is_alive(),
                   timeout_s=DEADLINE_S, what=lambda: f"burst checks finding the queue: {found}")
        assert thread.is_alive(), "the manager's loop ended"
    finally:
        manager.stopping = True
        thread.join(DEADLINE_S)
        client.close()
        socket.close()
        store.close()
        server.kill()
    assert planned == []
