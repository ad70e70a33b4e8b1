"""Memory: what a 200 MB preloaded handler costs per slot, by PSS and by RSS, and how Celery's
`worker_max_memory_per_child` compares with our Private_Dirty limit on the same handler.

1. Sizing: a master preloads 200 MB and forks --slots slots. From /proc: RSS, PSS and
   Private_Dirty of each process; slots that fit on this host by PSS (the master's
   capacity formula) against the same formula fed with RSS.
2. Recycling: the same 200 MB module under Celery prefork (concurrency 2,
   worker_max_memory_per_child = 150,000 KiB) and under 2 slots
   (private_dirty_limit_bytes = 150 MiB); --tasks tasks of 50 ms each, every task
   reports its pid. Two handlers: one that only reads the preloaded data, one that
   also leaks 10 MB per task. Counted: processes used, hence recycles.

Usage: .venv/bin/python bench/memory.py [--slots 4] [--tasks 50]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import end_to_end as e2e  # noqa: E402

sys.path.insert(0, str(e2e.REPO_ROOT))
from master.capacity import capacity  # noqa: E402
from master.host import mem_available_bytes  # noqa: E402
from queue_server.client import QueueClient  # noqa: E402
from slot.memory import MemoryUsage, read_memory  # noqa: E402

MB = 1024 * 1024
LIMIT_KIB = 150_000

PRELOAD = '''
import os, socket, time
PRELOADED = b"\\x01" * (200 * 1024 * 1024)
LEAK = []
_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
_to = ("127.0.0.1", int(os.environ["BENCH_UDP_PORT"]))


def work(leak: bool) -> None:
    if leak:
        LEAK.append(b"\\x02" * (10 * 1024 * 1024))
    time.sleep(0.05)
    _udp.sendto(b"%d" % os.getpid(), _to)
'''

SLOT_HANDLERS = PRELOAD + '''
from slot.handler import Handler, handler


@handler("mem_read")
class Reader(Handler):
    batch_size = 1

    def handle(self, jobs):
        work(False)


@handler("mem_leak")
class Leaker(Handler):
    batch_size = 1

    def handle(self, jobs):
        work(True)
'''

CELERY_TASKS = PRELOAD + '''
from celery import Celery

app = Celery("sm_mem", broker="{redis}")
app.conf.update(task_ignore_result=True, task_default_queue="{queue}",
                worker_max_memory_per_child={limit_kib}, worker_prefetch_multiplier=1,
                broker_connection_retry_on_startup=True, worker_hijack_root_logger=False)


@app.task
def read():
    work(False)


@app.task
def leak():
    work(True)
'''


class PidCounter(e2e.Completions):
    """Completions whose datagrams carry the worker's pid."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        super().__init__()

    def _receive(self) -> None:
        while True:
            data = self.sock.recv(64)
            with self._changed:
                self.pids.append(int(data))
                self.count += 1
                self._changed.notify_all()


def sizing(args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
    port = e2e.free_port()
    ipc_dir = tempfile.mkdtemp(prefix="smm-", dir="/tmp")
    (work / "cluster.toml").write_text(textwrap.dedent(f"""
        [queue_server]
        listen = "127.0.0.1:{port}"
        [master]
        handler_modules = ["sm_mem_handlers"]
        ipc_dir = "{ipc_dir}"
        static_slots = {{ mem_read = {args.slots} }}
    """))
    server = [str(e2e.VENV_BIN / "slotmap"), "queue-server", "--listen", f"127.0.0.1:{port}",
              "--data-dir", str(work / "q1"), "--fsync", "never"]
    master = [str(e2e.VENV_BIN / "slotmap"), "master", "--config", str(work / "cluster.toml"),
              "--report-file", str(work / "report.json"), "--report-interval-s", "0.2"]
    with e2e.process_group(server, env=env, log=work / "q1.log", cwd=work), \
            e2e.process_group(master, env=env, log=work / "master1.log", cwd=work) as master_proc:
        report_path = work / "report.json"

        def settled() -> bool:
            if not report_path.exists():
                return False
            report = json.loads(report_path.read_text())
            return report["slots_measured"] == args.slots and len(report["slots"]) == args.slots

        e2e.wait_until(settled, "slots measured")
        time.sleep(2.5)  # let every slot re-measure once all its siblings exist
        report = json.loads(report_path.read_text())
        pids = [master_proc.pid] + [slot["pid"] for slot in report["slots"]]
        usages = [read_memory(pid) for pid in pids]
        print_sizing(args.slots, usages, report)


def print_sizing(slots: int, usages: list[MemoryUsage], report: dict[str, object]) -> None:
    print(f"\n1. Sizing: a master that preloaded 200 MB, and {slots} forked slots (MiB)")
    print(f"{'process':<10} {'RSS':>8} {'PSS':>8} {'Private_Dirty':>14}")
    for name, usage in zip(["master"] + [f"slot {n}" for n in range(slots)], usages, strict=True):
        print(f"{name:<10} {usage.rss_bytes / MB:>8.1f} {usage.pss_bytes / MB:>8.1f}"
              f" {usage.private_dirty_bytes / MB:>14.1f}")
    rss = [u.rss_bytes for u in usages]
    pss = [u.pss_bytes for u in usages]
    print(f"{'sum':<10} {sum(rss) / MB:>8.1f} {sum(pss) / MB:>8.1f}")
    available = mem_available_bytes()

    def fit(figures: list[int]) -> int:
        return capacity(master_pss_bytes=figures[0], slots_pss_bytes=figures[1:],
                        mem_available_bytes=available, reserve_slots=1, max_slots=10**9,
                        load_avg_1m=0.0, cpus=1, max_load_per_cpu=1.0).slots

    print(f"MemAvailable {available / MB:,.0f} MiB; slots that fit, (sum + MemAvailable) / avg slot - 1:")
    print(f"  by PSS: {fit(pss):,} (avg slot {sum(pss) / slots / MB:.1f} MiB)   "
          f"by RSS: {fit(rss):,} (avg slot {sum(rss) / slots / MB:.1f} MiB)   "
          f"ratio {fit(pss) / max(1, fit(rss)):.1f}x")
    print(f"  the master's own report: capacity_by_memory {report['capacity_by_memory']:,}, "
          f"avg_slot {int(report['avg_slot_bytes']) / MB:.1f} MiB")  # type: ignore[call-overload]


def recycling_slotmap(args: argparse.Namespace, work: Path, env: dict[str, str], pids: PidCounter) -> dict[str, int]:
    port = e2e.free_port()
    ipc_dir = tempfile.mkdtemp(prefix="smm-", dir="/tmp")
    (work / "cluster2.toml").write_text(textwrap.dedent(f"""
        [queue_server]
        listen = "127.0.0.1:{port}"
        [queues.mem_read]
        private_dirty_limit_bytes = {LIMIT_KIB * 1024}
        [queues.mem_leak]
        private_dirty_limit_bytes = {LIMIT_KIB * 1024}
        [master]
        handler_modules = ["sm_mem_handlers"]
        ipc_dir = "{ipc_dir}"
        static_slots = {{ mem_read = 2, mem_leak = 2 }}
    """))
    server = [str(e2e.VENV_BIN / "slotmap"), "queue-server", "--listen", f"127.0.0.1:{port}",
              "--data-dir", str(work / "q2"), "--fsync", "never"]
    master = [str(e2e.VENV_BIN / "slotmap"), "master", "--config", str(work / "cluster2.toml"),
              "--report-file", str(work / "report2.json"), "--report-interval-s", "0.2"]
    used: dict[str, int] = {}
    with e2e.process_group(server, env=env, log=work / "q2.log", cwd=work), \
            e2e.process_group(master, env=env, log=work / "master2.log", cwd=work):
        client = QueueClient(f"127.0.0.1:{port}")
        e2e.wait_until(lambda: (work / "report2.json").exists()
                       and (work / "report2.json").read_text().count('"phase":"idle"') == 4, "4 idle slots")
        for queue in ("mem_read", "mem_leak"):
            first = len(pids.pids)
            client.put_many(queue, [b""] * args.tasks)
            pids.wait_for(first + args.tasks, 120.0)
            used[queue] = len(set(pids.pids[first:]))
        time.sleep(1.5)  # a leaking slot left idle still exits at its next memory reading
        report = json.loads((work / "report2.json").read_text())
        used["recycled_for_memory"] = report["counters"].get("recycled_for_memory", 0)
        client.close()
    return used


def recycling_celery(args: argparse.Namespace, work: Path, env: dict[str, str], pids: PidCounter) -> dict[str, int]:
    queue = f"sm_mem_celery_{os.getpid()}"
    (work / "sm_mem_celery.py").write_text(
        CELERY_TASKS.format(redis=e2e.REDIS_URL, queue=queue, limit_kib=LIMIT_KIB))
    sys.path.insert(0, str(work))
    import sm_mem_celery  # type: ignore[import-not-found]

    worker = [str(e2e.VENV_BIN / "celery"), "-A", "sm_mem_celery", "worker", "--pool", "prefork",
              "--concurrency", "2", "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
              "--without-heartbeat", "-Q", queue]
    used: dict[str, int] = {}
    with e2e.process_group(worker, env=dict(env, MP_LOG="1"), log=work / "celery.log", cwd=work):
        for name, task in (("mem_read", sm_mem_celery.read), ("mem_leak", sm_mem_celery.leak)):
            first = len(pids.pids)
            for _ in range(args.tasks):
                task.delay()
            pids.wait_for(first + args.tasks, 300.0)
            used[name] = len(set(pids.pids[first:]))
    return used


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=50)
    args = parser.parse_args()
    pids = PidCounter()
    os.environ["BENCH_UDP_PORT"] = str(pids.port)
    work = Path(tempfile.mkdtemp(prefix="sm-mem-"))
    (work / "sm_mem_handlers.py").write_text(SLOT_HANDLERS)
    env = dict(os.environ, PYTHONPATH=f"{e2e.REPO_ROOT}{os.pathsep}{work}", PYTHONUNBUFFERED="1")
    sizing(args, work, env)
    ours = recycling_slotmap(args, work, env, pids)
    celery = recycling_celery(args, work, env, pids)
    print(f"\n2. Recycling: {args.tasks} tasks of 50 ms on 2 workers, 200 MB preloaded, limit 150,000 KiB")
    print(f"{'handler':<34} {'Celery (max_memory_per_child, RSS)':>36} {'Slotmap (Private_Dirty)':>25}")
    for queue, label in (("mem_read", "reads the preloaded data"), ("mem_leak", "also leaks 10 MB per task")):
        print(f"{label:<34} {celery[queue]:>28} processes {ours[queue]:>17} processes")
    print(f"Slotmap recycled {ours['recycled_for_memory']} slots for memory in all "
          f"(a slot exits after the batch in which it passed the limit; checked every second)")
    print(f"logs: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
