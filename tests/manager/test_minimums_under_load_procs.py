"""A host capped by load to one slot still runs every queue's configured minimum when the
manager plans it (manager/planning/minimum_room.py): real queue server, manager, master and slots.

Seen under load before: docs/GUIDE.md's cluster held one slot for emails and did none of 110
thumbnails jobs in 69 s."""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_service_procs import Cluster, poll_until, wait_running

from queue_server.client import QueueClient

QUEUES = {
    "demo_noop": {"min_slots": 1, "max_slots": 2, "priority": 5},
    "demo_resize": {"min_slots": 1, "max_slots": 2, "priority": 0},
    "demo_echo": {"max_slots": 1, "priority": 0},
    "demo_flaky": {"max_slots": 0},
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from Cluster.with_queue_server(tmp_path, QUEUES)


def test_a_host_capped_to_one_slot_by_load_runs_every_queues_minimum_and_one_slot_per_waiting_queue(
    cluster: Cluster,
) -> None:
    cluster.start_manager()
    # A limit no real load stays under (any running process keeps the 1-minute load above a
    # millionth per CPU): the master's own bound is min_slots_under_load = 1.
    master = cluster.start_master("alpha", max_load_per_cpu=1e-6, min_slots_under_load=1)
    wait_running(master, cluster, {"demo_noop": 1, "demo_resize": 1}, timeout_s=30.0)
    report = master.report()
    assert report is not None and report.capacity == 1 and report.load_cap() is not None
    # The low-priority queue is served while the high one holds its slot.
    with QueueClient(cluster.queue_server.address) as client:
        client.put_many("demo_resize", [b'{"photo_id": 1}'] * 5)
        poll_until(lambda: (s := client.stats().get("demo_resize")) is not None and s.done == 5,
                   timeout_s=30.0, what=lambda: f"5 demo_resize jobs done\n{cluster.logs()}")
        # A queue with no minimum and waiting jobs gets one slot while they wait, and gives
        # it back when they are done (its guide twin: notify, 0 of 114 jobs done in 82 s).
        client.put_many("demo_echo", [b"hello"] * 5)
        # Only a demo_echo slot does these jobs. Its life can be shorter than the master's report
        # interval (forked at the burst, its 5 jobs done, stopped at the early report's plan
        # 0.1 s later), so the report file may never show it: the fork is read from the log.
        poll_until(lambda: (s := client.stats().get("demo_echo")) is not None and s.done == 5,
                   timeout_s=30.0, what=lambda: f"5 demo_echo jobs done\n{cluster.logs()}")
        assert re.search(r"forked slot \d+ \(pid \d+\) for demo_echo", cluster.logs()), cluster.logs()
        # A report written before the echo slot's fork also shows only the minimums: wait for
        # one written after its jobs were done that holds no echo slot in any state.
        echo_done_at = time.time()

        def echo_slot_gone() -> bool:
            report = master.report()
            return (report is not None and report.sent_at_unix > echo_done_at
                    and not any(slot.queue == "demo_echo" for slot in report.slots)
                    and master.running() == {"demo_noop": 1, "demo_resize": 1})

        poll_until(echo_slot_gone, timeout_s=30.0,
                   what=lambda: f"no demo_echo slot; report {master.report()}\n{cluster.logs()}")
        # Beyond the minimums the load bound holds: demo_noop's backlog gets no second slot,
        # through burst checks and full plans (one every PLAN_INTERVAL_S) while it drains.
        client.put_many("demo_noop", [b"x"] * 3000)
        seen: list[dict[str, int]] = []

        def drained() -> bool:
            seen.append(master.running())
            stats = client.stats().get("demo_noop")
            return stats is not None and stats.done == 3000

        poll_until(drained, timeout_s=60.0, what=lambda: f"3000 demo_noop jobs done\n{cluster.logs()}")
    assert max(sum(running.values()) for running in seen) == 2, seen
