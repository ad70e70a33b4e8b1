"""How late a schedule's tick is put while the manager plans (issue 18: within 1 s), and while
another schedule catches up 10,000 missed ticks (issue 25: within 1 s; --catch-up).

The firing thread (manager/schedules/firing.py) against a real queue server and a real SQLite
database, in one process with a thread that plans a 10,000-queue, 100-host cluster back to
back (manager/planning/planner.py: pure Python, holding the GIL as a real plan does). Printed: the
lag of each tick's PUT after its time, p50 / p99 / max, with and without the planning thread.

    .venv/bin/python bench/schedule_lag.py [--seconds 20] [--catch-up]

Keys are read back by their text, not through our tick functions, so the same file runs on an
older commit's tree (`cd <old worktree> && python /path/to/bench/schedule_lag.py --catch-up`).
"""
from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "queue_server"))

import server_proc  # noqa: E402
from sqlalchemy import text  # noqa: E402

from config.models import QueueConfig  # noqa: E402
from config.schedules import ScheduleConfig  # noqa: E402
from manager.planning.planner import plan  # noqa: E402
from manager.schedules.firing import Firing, Job  # noqa: E402
from manager.schedules.state import ScheduleStates  # noqa: E402
from manager.storage.model import HostCapacity, QueueStats, SlotMap  # noqa: E402
from manager.storage.store import Store  # noqa: E402
from queue_server.client import QueueClient  # noqa: E402


def planning_until(stop: threading.Event, plans: list[float]) -> None:
    rng = random.Random(1)
    queues = {f"q{n}": QueueConfig(priority=rng.randint(0, 9), max_slots=50) for n in range(10_000)}
    stats = {name: QueueStats(waiting_jobs=rng.randint(0, 500), jobs_done=rng.randint(1, 5000),
                              busy_s=rng.uniform(1, 600), slot_lifetime_s=600.0) for name in queues}
    hosts = [HostCapacity(f"h{n}", 64) for n in range(100)]
    current = SlotMap.empty()
    while not stop.is_set():
        started = time.monotonic()
        current = plan(current, queues, stats, hosts, target_load=0.8).slot_map
        plans.append(time.monotonic() - started)


BACKLOG_TICKS = 10_000
KEY = re.compile(r"^every_second@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{3})?)Z$")


def tick_of(key: str) -> float | None:
    found = KEY.match(key)
    return None if found is None else datetime.fromisoformat(found[1]).replace(tzinfo=UTC).timestamp()


def measure(seconds: float, *, planning: bool, backlog: bool = False) -> tuple[list[float], list[float], int]:
    work = Path(tempfile.mkdtemp(prefix="schedule-lag-"))
    server = server_proc.start_queue_server(work, "--fsync", "never")
    store = Store.open(f"sqlite:///{work / 'slotmap.db'}")
    client = QueueClient(server.address)
    rules = {"every_second": ScheduleConfig(every_s=1, queue="ticks")}
    if backlog:
        # As a ~2.8-hour outage leaves it (the table's columns are the same on 29606e0).
        rules["backlog"] = ScheduleConfig(every_s=1, queue="backlog", catch_up="all", catch_up_max=BACKLOG_TICKS)
        with store.engine.begin() as conn:
            conn.execute(text("INSERT INTO schedules (name, last_tick_unix, paused, updated_at_unix) "
                              "VALUES ('backlog', :at, false, :at)"), {"at": time.time() - BACKLOG_TICKS - 30})
    fired_at: list[tuple[str, float]] = []

    def put(job: Job) -> None:
        client.put(job.queue, job.data, priority=job.priority, key=job.key)
        fired_at.append((job.key, time.time()))

    firing = Firing(rules, states=ScheduleStates(store.engine), put=put, note=lambda at, event: None)
    stop = threading.Event()
    plans: list[float] = []
    planner = threading.Thread(target=planning_until, args=(stop, plans), daemon=True)
    if planning:
        planner.start()
    ends = time.time() + seconds
    thread = threading.Thread(target=firing.run_until, args=(lambda: time.time() > ends,), daemon=True)
    thread.start()
    thread.join(seconds + 30)
    stop.set()
    if planning:
        planner.join(60)
    client.close()
    store.close()
    server.kill()
    delays = [at - tick for key, at in fired_at if (tick := tick_of(key)) is not None]
    caught = sum(1 for key, _ in fired_at if key.startswith("backlog@"))
    return delays, plans, caught


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--catch-up", action="store_true",
                        help=f"beside a schedule catching up {BACKLOG_TICKS} ticks, no planner")
    args = parser.parse_args()
    if args.catch_up:
        delays, _, caught = measure(args.seconds, planning=False, backlog=True)
        ms = sorted(d * 1000 for d in delays)
        expected = int(args.seconds) - 1
        print(f"| every_s=1 beside a 10,000-tick catch-up | its ticks (of ~{expected}) | lag p50 ms | "
              "max ms | backlog ticks put |")
        print("| --- | ---: | ---: | ---: | ---: |")
        if not ms:
            print(f"| - | 0 | - | - | {caught} |")
        else:
            print(f"| | {len(ms)} | {statistics.median(ms):.1f} | {ms[-1]:.1f} | {caught} |")
        return 0
    print("| planner beside | ticks | lag p50 ms | p99 ms | max ms | plans | plan mean s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for planning in (False, True):
        delays, plans, _ = measure(args.seconds, planning=planning)
        ms = sorted(d * 1000 for d in delays)
        p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
        mean_plan = f"{statistics.mean(plans):.2f}" if plans else "-"
        print(f"| {'yes' if planning else 'no'} | {len(ms)} | {statistics.median(ms):.1f} | {p99:.1f} | "
              f"{ms[-1]:.1f} | {len(plans)} | {mean_plan} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
