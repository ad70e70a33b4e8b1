"""A code reload under load (issue 27): 20,000 jobs of 10 ms on 4 slots, the handler module
rewritten and the master told to reload when about a third are done.

Two ways in the same run, on the same machine and load:
- reload: SIGHUP (this branch): a new generation, one old slot per queue at a time;
- restart: SIGTERM the master, start a new one (the only way before, at 29606e0; run here on
  this branch's graceful stop, which gives back the unstarted jobs of each batch).

Each job appends `<key> <attempt> <version> <unix time>` to its slot's own file. Printed per
way: the steady rate (median of the 0.25 s bins before the change), the seconds under half
of it from the change to the end (the last 0.5 s, where the queue runs dry, left out), the
time from the change until every slot runs the new version, and lost (never done), re-run
(done more than once) and charged (a run with attempt > 1, or a failure on the server) jobs.

With --base COMMIT, a third way: restart@base, the restart with that commit's code (whose
SIGTERM finished each slot's whole batch).

Usage: .venv/bin/python bench/reload.py [--jobs 20000] [--slots 4] [--job-ms 10] [--only reload]
       .venv/bin/python bench/reload.py --base 29606e0
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.base_checkout import code_dirs  # noqa: E402
from bench.end_to_end import free_port, process_group, wait_until  # noqa: E402
from master.report import HostReport  # noqa: E402
from queue_server.client import QueueClient  # noqa: E402

BIN_S = 0.25
TAIL_S = 0.5
RUN_DEADLINE_S = 900.0
QUEUE = "bench_reload"

HANDLER = '''
import os, time
from slot.handler import Handler, handler

VERSION = "{version}"
JOB_S = {job_s}
_out = None


@handler("bench_reload")
class Bench(Handler):
    batch_size = 10

    def setup(self):
        global _out
        _out = open(os.path.join("{runs}", f"{{VERSION}}-{{os.getpid()}}.log"), "a", buffering=1)

    def handle_job(self, job):
        time.sleep(JOB_S)
        _out.write(f"{{job.key}} {{job.attempt}} {{VERSION}} {{time.time():.4f}}\\n")
'''


@dataclass
class Outcome:
    way: str
    steady_per_s: float
    under_half_s: float
    switch_s: float
    lost: int
    rerun: int
    charged: int
    total_s: float


def write_handler(app: Path, runs: Path, version: str, job_s: float) -> None:
    (app / "sm_bench_reload.py").write_text(HANDLER.format(version=version, job_s=job_s, runs=runs))


def report(work: Path) -> HostReport | None:
    with contextlib.suppress(OSError, ValueError):
        return HostReport.decode((work / "report.json").read_bytes())
    return None


def run_way(way: str, args: argparse.Namespace, root: Path, code: Path) -> Outcome:
    work = root / way
    # The code under test first on the path (the venv's editable finder comes after it).
    env = dict(os.environ, PYTHONPATH=str(code))
    slotmap = [sys.executable, "-m", "deploy.cli"]
    app, runs = work / "app", work / "runs"
    app.mkdir(parents=True)
    runs.mkdir()
    write_handler(app, runs, "v1", args.job_ms / 1000)
    port = free_port()
    ipc_dir = tempfile.mkdtemp(prefix="smr-", dir="/tmp")
    config = work / "cluster.toml"
    config.write_text(textwrap.dedent(f"""
        [queue_server]
        listen = "127.0.0.1:{port}"
        [queues.{QUEUE}]
        lock_timeout_s = 60
        [master]
        handler_modules = ["sm_bench_reload"]
        python_path = ["{app}"]
        ipc_dir = "{ipc_dir}"
        max_load_per_cpu = 1000.0
        static_slots = {{ {QUEUE} = {args.slots} }}
    """))
    server = [*slotmap, "queue-server", "--config", str(config),
              "--data-dir", str(work / "queue-data"), "--fsync", "never"]
    master_cmd = [*slotmap, "master", "--config", str(config),
                  "--report-file", str(work / "report.json"), "--report-interval-s", "0.2"]
    masters: list[subprocess.Popen[bytes]] = []

    def start_master() -> None:
        with open(work / f"master{len(masters)}.log", "wb") as out:
            masters.append(subprocess.Popen(master_cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                            cwd=work, start_new_session=True))

    with process_group(server, env=env, log=work / "queue-server.log", cwd=work):
        client = QueueClient(f"127.0.0.1:{port}", timeout_s=30.0)
        try:
            wait_until(lambda: _ping(client), "queue server up")
            for first in range(0, args.jobs, 1000):
                client.put_many(QUEUE, [b"x"] * min(1000, args.jobs - first))
            start_master()
            wait_until(lambda: client.total(QUEUE).jobs <= args.jobs * 2 // 3, "a third done", RUN_DEADLINE_S)
            write_handler(app, runs, "v2", args.job_ms / 1000)
            changed_at = time.time()
            if way.startswith("reload"):
                masters[0].send_signal(signal.SIGHUP)
            else:
                masters[0].send_signal(signal.SIGTERM)
                masters[0].wait(timeout=120)
                start_master()
            wait_until(lambda: all_new(report(work), args.slots, way, masters[-1].pid), "every slot on v2",
                       RUN_DEADLINE_S)
            switch_s = time.time() - changed_at
            wait_until(lambda: _finished(client), "every job done", RUN_DEADLINE_S)
            stats = client.stats(QUEUE).get(QUEUE)
            failed = 0 if stats is None else stats.failed_total + stats.dead_total
        finally:
            client.close()
            for process in masters:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
    return summarise(way, runs, args.jobs, changed_at, switch_s, int(failed or 0))


def all_new(found: HostReport | None, slots: int, way: str, master_pid: int) -> bool:
    if found is None or found.master_pid != master_pid:
        return False
    running = [s for s in found.slots if s.state == "running"]
    if way.startswith("reload"):
        return found.code_generation >= 1 and not found.code_reloading and len(running) == slots
    return len(running) == slots


def _finished(client: QueueClient) -> bool:
    total = client.total(QUEUE)
    return total.jobs == 0 and total.running == 0


def _ping(client: QueueClient) -> bool:
    try:
        client.total(QUEUE)
    except Exception:  # not up yet
        return False
    return True


def summarise(way: str, runs: Path, jobs: int, changed_at: float, switch_s: float, failed: int) -> Outcome:
    keys: Counter[str] = Counter()
    charged = failed
    times: list[float] = []
    for path in runs.iterdir():
        for line in path.read_text().splitlines():
            key, attempt, _version, at = line.split()
            keys[key] += 1
            charged += int(attempt) > 1
            times.append(float(at))
    times.sort()
    start, end = times[0], times[-1]
    bins = Counter(int((at - start) / BIN_S) for at in times)
    before = [bins.get(i, 0) / BIN_S for i in range(int(1 / BIN_S), int((changed_at - start) / BIN_S))]
    steady = statistics.median(before) if before else 0.0
    first_after = int((changed_at - start) / BIN_S)
    last = int((end - TAIL_S - start) / BIN_S)
    under = sum(1 for i in range(first_after, last) if bins.get(i, 0) / BIN_S < steady / 2) * BIN_S
    return Outcome(way, steady, under, switch_s, jobs - len(keys), sum(n - 1 for n in keys.values()),
                   charged, end - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--job-ms", type=float, default=10.0)
    parser.add_argument("--only", choices=["reload", "restart"])
    parser.add_argument("--base", help="also restart a master of this commit (restart@base)")
    args = parser.parse_args()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="bench-reload-") as root, \
            code_dirs(args.base, prefix="bench-reload-base-") as dirs:
        for way in ([args.only] if args.only else ["reload", "restart"]):
            outcomes.append(run_way(way, args, Path(root), dirs["new"]))
        if args.base:
            outcomes.append(run_way("restart@base", args, Path(root), dirs[f"base {args.base}"]))
    print(f"{args.jobs} jobs of {args.job_ms:g} ms on {args.slots} slots; load {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} CPUs")
    print(f"{'way':<12} {'steady/s':>9} {'s < half':>9} {'switch s':>9} {'lost':>5} {'re-run':>7} "
          f"{'charged':>8} {'total s':>8}")
    for o in outcomes:
        print(f"{o.way:<12} {o.steady_per_s:>9.0f} {o.under_half_s:>9.2f} {o.switch_s:>9.2f} {o.lost:>5} "
              f"{o.rerun:>7} {o.charged:>8} {o.total_s:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
