"""Issue 15 end to end: a job that crashes its slot becomes a `slot_crashed` event in the
manager's database (queue, host, pid, exit code, the job charged), folded when many.

Real queue server (with the queue's retry policy), manager, master and slots."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_service_procs import Cluster, poll_until, server_proc, to_toml, wait_running

from queue_server.client import QueueClient

POLICY = {"max_attempts": 3, "retry_base_s": 0.2, "retry_max_s": 0.5, "lock_timeout_s": 600.0}
QUEUES = {"crashy": {"min_slots": 1, "max_slots": 1, "batch_size": 5, **POLICY}}
HANDLER = '''
import os
from slot.handler import Handler, handler


@handler("crashy")
class Crashy(Handler):
    def handle_job(self, job):
        if job.data == b"poison":
            os._exit(7)
'''


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    (tmp_path / "crashy_handlers.py").write_text(HANDLER)
    started = Cluster.create(tmp_path, QUEUES)
    try:
        policy = tmp_path / "queue-server.toml"
        policy.write_text(to_toml({"queues.crashy": QUEUES["crashy"]}))
        started.queue_server = server_proc.start_queue_server(tmp_path, "--fsync", "never",
                                                              "--config", str(policy))
        started.start_manager()
        master = started.start_master("alpha", handler_modules=["crashy_handlers"],
                                      python_path=[str(tmp_path)])
        wait_running(master, started, {"crashy": 1}, timeout_s=30.0)
        yield started
    finally:
        started.close()


def test_a_crash_is_an_event_naming_the_job_and_its_retries_are_folded(cluster: Any) -> None:
    assert cluster.queue_server is not None
    with QueueClient(cluster.queue_server.address) as client:
        for n in range(4):
            client.put("crashy", b"good", key=f"good-{n}")
        client.put("crashy", b"poison", key="poison-1")

        def dead() -> bool:
            info = client.job("poison-1")
            return info is not None and info.state == "dead"

        poll_until(dead, timeout_s=60.0, what=lambda: f"the poison job dead\n{cluster.logs()}")
    # Three crashes: the first alone in its event, the two retries within 10 s folded into one
    # (or, on a slow machine, each alone): every crash counted once, each naming the job.
    events = poll_until(
        lambda: (found := cluster.events("slot_crashed"))
        and sum(int(e.detail["count"]) for e in found) >= 3 and found,
        timeout_s=60.0, what=lambda: f"3 crashes as events\n{cluster.logs()}")
    assert sum(int(e.detail["count"]) for e in events) == 3
    first = events[0]
    assert (first.queue, first.host, first.actor) == ("crashy", "alpha", "master")
    # One crash reads "exit 7 ...; job poison-1 charged"; two crashes that reached the manager
    # in one report are folded: "2 slot crashes ... (exit_7 x2); jobs charged: poison-1, ...".
    assert "poison-1" in first.message
    assert ("exit 7" in first.message) if first.detail["count"] == 1 else ("exit_7 x" in first.message)
    listed = [crash for event in events for crash in event.detail["crashes"]]
    assert [crash["key"] for crash in listed] == ["poison-1"] * 3
    assert {crash["cause"] for crash in listed} == {"exit_7"}
    assert all(crash["exit_code"] == 7 and crash["signal"] is None for crash in listed)
    print(json.dumps([e.message for e in events]))
