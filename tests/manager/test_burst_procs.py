"""A burst between plans with real processes: the manager sees a backlog appear in the queue
server and grows the queue at once, long before its next full plan (issue 19)."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_service_procs import Cluster, poll_until, wait_running

from queue_server.client import QueueClient

# Full plans this far apart: only a burst plan can grow the queue within the test (the
# pytest timeout, 120 s, ends the test before a second full plan).
PLAN_INTERVAL_S = 120.0
# The goal is a second (bench/planner_burst.py measures it); a busy shared machine gets room.
GROWN_DEADLINE_S = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    started = Cluster.create(
        tmp_path,
        {"demo_resize": {"priority": 5, "min_slots": 1, "max_slots": 3, "batch_size": 5},
         "demo_noop": {"priority": 0, "min_slots": 1, "max_slots": 4}},
        plan_interval_s=PLAN_INTERVAL_S, burst_check_s=0.25,
    )
    started.start_queue_server()
    yield started
    started.close()


def test_a_backlog_that_appears_between_plans_gets_its_slots_within_seconds(cluster: Cluster) -> None:
    cluster.start_manager()
    master = cluster.start_master("h1")
    wait_running(master, cluster, {"demo_resize": 1, "demo_noop": 1}, timeout_s=30.0)
    # The first plan has run; the next full one is a minute away. Now fill the queue.
    with QueueClient(cluster.queue_server.address) as client:
        # A few warm-up jobs teach the manager the job time, as a queue in use has.
        client.put_many("demo_resize", [json.dumps({"rounds": 20000})] * 10)
        poll_until(lambda: client.stats("demo_resize")["demo_resize"].done >= 10, timeout_s=30.0,
                   what="the warm-up jobs done")
        put_at = time.monotonic()
        client.put_many("demo_resize", [json.dumps({"rounds": 20000})] * 2000)
    wait_running(master, cluster, {"demo_resize": 3, "demo_noop": 1}, timeout_s=GROWN_DEADLINE_S)
    grown_s = time.monotonic() - put_at
    assert grown_s < PLAN_INTERVAL_S / 4, f"grown after {grown_s:.1f} s"
    manager_log = cluster.procs[0].log_text()
    assert "burst in demo_resize" in manager_log
