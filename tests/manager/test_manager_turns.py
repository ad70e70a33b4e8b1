"""The active manager's loop survives a turn that raises: logged, and the next turn runs.

Before the audit branch only planning had a boundary: anything else that raised in a turn
(taking reports, heartbeats, refusals, history) ended the loop and the manager with it."""
from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from polling import DEADLINE_S, poll_until

from config.models import ClusterConfig, ManagerConfig
from manager.failover.leader import NoLease
from manager.hosts.link import ManagerSocket
from manager.planning.plan_inputs import QueueStatsReader
from manager.service import Manager
from manager.storage.store import Store
from queue_server.client import QueueClient
from tests.conftest import free_port


def test_a_manager_turn_that_raises_is_logged_and_the_loop_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="manager.service")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = ClusterConfig(manager=ManagerConfig(listen=endpoint, heartbeat_interval_s=0.05))
    store = Store.open(f"sqlite:///{tmp_path / 'history.db'}")
    socket = ManagerSocket(endpoint)
    client = QueueClient(f"127.0.0.1:{free_port()}", timeout_s=0.2, connect_timeout_s=0.2,
                         reconnect_attempts=0)
    manager = Manager(config, store=store, socket=socket, stats_reader=QueueStatsReader(client),
                      lease=NoLease())
    turns: list[int] = []
    note_refusals = manager.note_refusals

    def refusals_failing_once() -> None:
        # A bug in one turn: no real master or database outage makes this step raise.
        turns.append(len(turns) + 1)
        if len(turns) == 1:
            raise RuntimeError("a bug in one turn")
        note_refusals()

    manager.note_refusals = refusals_failing_once  # type: ignore[method-assign]
    ended: list[int] = []
    thread = threading.Thread(target=lambda: ended.append(manager.run()), daemon=True)
    thread.start()
    try:
        poll_until(lambda: len(turns) >= 3 or not thread.is_alive(), timeout_s=DEADLINE_S,
                   what=lambda: f"turns after the failing one: {turns}")
        assert thread.is_alive(), "the manager's loop ended"
    finally:
        manager.stopping = True
        thread.join(DEADLINE_S)
        client.close()
        socket.close()
        store.close()
    assert ended == [0]
    messages = [r.getMessage() for r in caplog.records]
    assert "the manager's turn failed (RuntimeError: a bug in one turn); the next in 0.1 s (masters keep their last map)" in messages, messages
    assert "the manager's turn works again after 1 failed turns" in messages, messages
