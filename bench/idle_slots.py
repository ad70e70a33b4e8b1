"""More queues with work than slots, real processes: how long queues with jobs wait with no
slot while slots sit idle on queues with nothing left.

One queue server, one manager (plan_interval_s 5, stats_window_s 60: the defaults) and one
master of SLOTS slots; QUEUES queues of `min_slots = 0` (tests/master/handlers/sm_test_wide.py,
jobs that sleep), JOBS jobs of JOB_S put into each. Sampled every 0.1 s from the queue server's
STATS and the master's report file. Printed: when all jobs were done, the time some queue
waited with no slot beside a slot whose queue had nothing waiting or running (in all, and the
longest stretch), and when the last queue got its first slot.

    .venv/bin/python bench/idle_slots.py [--queues 60] [--slots 24] [--jobs 10] [--job-s 0.2]
                                         [--burst-check-s 0.25]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "tests"), str(REPO_ROOT / "tests" / "manager")]

from test_service_procs import Cluster, Proc, poll_until  # noqa: E402

from queue_server.client import QueueClient  # noqa: E402

LIMIT_S = 300.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=60, choices=range(1, 61), metavar="1..60")
    parser.add_argument("--slots", type=int, default=24)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--job-s", type=float, default=0.2)
    parser.add_argument("--burst-check-s", type=float, default=0.25)
    args = parser.parse_args()
    names = [f"wide_{i:02d}" for i in range(args.queues)]
    cluster = Cluster.create(Path(tempfile.mkdtemp(prefix="idle-slots-")), {n: {"min_slots": 0} for n in names},
                             plan_interval_s=5.0, stats_window_s=60.0, burst_check_s=args.burst_check_s)
    cluster.start_queue_server()
    try:
        cluster.start_manager()
        master = cluster.start_master("h1", max_slots=args.slots, handler_modules=["sm_test_wide"],
                                      python_path=[str(REPO_ROOT / "tests" / "master" / "handlers")])
        poll_until(lambda: master.report() is not None, timeout_s=60.0, what="the master's report")
        with QueueClient(cluster.queue_server.address) as client:
            for name in names:
                client.put_many(name, [json.dumps({"sleep_s": args.job_s})] * args.jobs)
            measure(client, master, names, args.jobs)
    finally:
        cluster.close()


def measure(client: QueueClient, master: Proc, names: list[str], jobs: int) -> None:
    put_at = last = time.monotonic()
    first_slot: dict[str, float] = {}
    starved_s = stretch_s = longest_s = 0.0
    while True:
        stats = client.stats_of(names)
        slots = master.running()
        now = time.monotonic()
        first_slot.update({q: now - put_at for q in slots if q not in first_slot})
        waiting = [q for q in names if stats[q].ready > 0 and not slots.get(q)]
        idle = [q for q in slots if stats[q].ready == 0 and stats[q].running == 0]
        if waiting and idle:
            starved_s += now - last
            stretch_s += now - last
            longest_s = max(longest_s, stretch_s)
        else:
            stretch_s = 0.0
        last = now
        if all(stats[q].done >= jobs for q in names) or now - put_at > LIMIT_S:
            break
        time.sleep(0.1)  # a sampling period, not a wait for a condition
    print(f"all done after {now - put_at:.1f} s; queues with jobs and no slot beside idle slots: "
          f"{starved_s:.1f} s in all, {longest_s:.1f} s at a stretch; last first slot "
          f"{max(first_slot.values(), default=float('nan')):.1f} s after the put; "
          f"never served {len(names) - len(first_slot)}")


if __name__ == "__main__":
    main()
