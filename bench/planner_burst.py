"""A burst into an important queue, real processes (issue 19): how fast the manager gives it slots.

One queue server, one manager and one master of 10 slots (or two masters of 5, one killed -9
at t = 2 s: --host-lost). `burst` (priority 5, 1..8 slots) has 1 slot while `low`
(priority 0) holds the rest with a backlog of its own; then 4,000 jobs of 20 ms go into
`burst`. Warm: 20 burst jobs ran a second before (the manager knows the job time). Cold
(issue 28): `burst` never ran a job and idles at its minimum for --cold-idle-s (30 s, three
stats windows) before the burst: no job time, no busy slot in the window. Printed: when `burst` runs 2x, 4x and its maximum of slots (from the masters'
report files), and its drain time against the ideal (4,000 x 20 ms over 8 slots = 10 s;
host lost: 8 slots until the kill, then the slots the survivor can give it: its 5 less
`low`'s minimum of 1, so 2 s + 3,200 x 20 ms / 4 = 18 s). --modes picks the runs: warm or
cold with the burst check on (burst_check_s 0.25) or off (`-off`: bursts wait for the next 5 s
plan), in the same run.

    .venv/bin/python bench/planner_burst.py [--jobs 4000] [--host-lost] [--modes warm,cold,cold-off]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from master.report import HostReport  # noqa: E402
from queue_server.client import QueueClient  # noqa: E402

JOB_S = 0.02
BURST_MAX = 8
LOW_MIN = 1
KILL_AT_S = 2.0
START_DEADLINE_S = 60.0
HANDLERS = f'''
import os
import time
from slot.handler import Handler, handler


# Jobs run one by one (handle_job): a slot retargeted during a batch finishes the job it
# runs and gives back the others (slot/retarget.py), as a handler of independent jobs does.
@handler("burst")
class Burst(Handler):
    batch_size = 10

    def setup(self):
        self.started = False

    def handle_job(self, job):
        if not self.started:  # when this slot began work on the queue (a fork or a retarget)
            self.started = True
            with open(os.environ["BURST_STARTS"], "a") as starts:
                starts.write(f"{{os.getpid()}} {{time.time()}}\\n")
        time.sleep({JOB_S})


@handler("low")
class Low(Handler):
    batch_size = 10

    def handle_job(self, job):
        time.sleep({JOB_S})
'''


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Run:
    label: str
    at_2x_s: float | None = None
    at_4x_s: float | None = None
    at_max_s: float | None = None
    drained_s: float | None = None
    ideal_s: float = 0.0
    # Host lost: from the manager's "lost" to the survivor running the burst queue's share.
    lost_to_replanned_s: float | None = None
    # From a master receiving a map to the first job of each slot it gave the burst queue.
    map_to_work_ms: list[float] | None = None


@contextlib.contextmanager
def spawned(args: list[str], *, log: Path, cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ, PYTHONPATH=f"{REPO_ROOT}{os.pathsep}{cwd}", PYTHONUNBUFFERED="1",
               BURST_STARTS=str(cwd / "burst_starts.txt"))
    with open(log, "ab") as out:
        process = subprocess.Popen([sys.executable, "-m", "deploy.cli", *args], stdout=out,
                                   stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True)
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def running(report_file: Path, queue: str) -> int:
    try:
        report = HostReport.decode(report_file.read_bytes())
    except (FileNotFoundError, ValueError):
        return 0
    return sum(1 for slot in report.slots if slot.queue == queue and slot.state == "running")


def wait_until(predicate: object, what: str, timeout_s: float = START_DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"not reached in {timeout_s} s: {what}")
        time.sleep(0.05)


def one_run(work: Path, *, jobs: int, burst_check_s: float, host_lost: bool, low_backlog: int,
            cold_idle_s: float = 0.0) -> Run:
    work.mkdir(parents=True)
    (work / "sm_bench_burst.py").write_text(HANDLERS)
    queue_port, manager_port = free_port(), free_port()
    hosts = ["a", "b"] if host_lost else ["a"]
    per_host = 10 // len(hosts)
    config = work / "cluster.toml"
    config.write_text(f'''
[queue_server]
listen = "127.0.0.1:{queue_port}"
data_dir = "{work / 'queue'}"
fsync = "never"

# Short locks: a live slot renews its lock (TOUCH), so only a dead host's batches wait
# this long; with the default 60 s, the host-lost run measured the lock, not the planner.
[queues.burst]
priority = 5
min_slots = 1
max_slots = {BURST_MAX}
lock_timeout_s = 2.0

[queues.low]
priority = 0
min_slots = {LOW_MIN}
max_slots = 10
lock_timeout_s = 2.0

[master]
python_path = ["{work}"]
handler_modules = ["sm_bench_burst"]
ipc_dir = "{tempfile.mkdtemp(prefix='sm-burst-', dir='/tmp')}"
max_slots = {per_host}
reserve_slots = 0
max_load_per_cpu = 1000.0

[manager]
listen = "tcp://127.0.0.1:{manager_port}"
database_url = "sqlite:///{work / 'slotmap.db'}"
plan_interval_s = 5.0
heartbeat_interval_s = 0.25
heartbeat_liveness = 4
stats_window_s = 10.0
burst_check_s = {burst_check_s}
''')
    config.chmod(0o600)
    address = f"127.0.0.1:{queue_port}"
    with contextlib.ExitStack() as stack:
        stack.enter_context(spawned(["queue-server", "--config", str(config)], log=work / "qs.log", cwd=work))
        wait_until(lambda: _answers(address), "the queue server")
        with QueueClient(address) as client:
            if low_backlog:
                client.put_many("low", [b"x"] * low_backlog)
        stack.enter_context(spawned(["manager", "--config", str(config)], log=work / "manager.log", cwd=work))
        reports = {}
        masters = {}
        for host in hosts:
            reports[host] = work / f"{host}.report.json"
            host_config = work / f"master-{host}.toml"
            host_config.write_text(config.read_text().replace("[master]\n", f'[master]\nhost_name = "{host}"\n'))
            host_config.chmod(0o600)
            masters[host] = stack.enter_context(spawned(
                ["master", "--config", str(host_config), "--manager",
                 f"tcp://127.0.0.1:{manager_port}", "--report-file", str(reports[host]),
                 "--report-interval-s", "0.05"], log=work / f"master-{host}.log", cwd=work))

        def burst_slots() -> int:
            return sum(running(reports[h], "burst") for h in hosts if masters[h].poll() is None)

        wait_until(lambda: burst_slots() >= 1 and sum(running(reports[h], "low") for h in hosts) >= 1,
                   "the first plan")
        if not low_backlog:
            # An idle low queue holds the rest: its slots wait in GETB, warm (the planner keeps them).
            with QueueClient(address) as client:
                client.put_many("low", [b"x"] * 2000)
                wait_until(lambda: sum(running(reports[h], "low") for h in hosts) >= 9 - len(hosts) + 1
                           or client.stats("low")["low"].ready == 0, "low's slots")
                wait_until(lambda: client.stats("low")["low"].ready == 0, "low drained")
        else:
            # A busy low queue holds the rest: the burst takes its slots in the middle of
            # batches (retargets), not free capacity (forks), as in the first plan.
            wait_until(lambda: sum(running(reports[h], "low") for h in hosts) >= 9 - len(hosts) + 1,
                       "low's slots")
        with QueueClient(address) as client:
            if cold_idle_s > 0:
                # Cold: no burst job ever ran; the queue idles at its minimum for longer than the
                # stats window (10 s), so the manager knows no job time and sees no busy slot.
                time.sleep(cold_idle_s)
            else:
                # A few burst jobs first: the manager learns the queue's job time, as in a queue in use.
                client.put_many("burst", [b"x"] * 20)
                wait_until(lambda: client.stats("burst")["burst"].done >= 20, "the warm-up")
                time.sleep(1.0)  # the next plan interval settles; the burst comes between plans
            start = time.monotonic()
            client.put_many("burst", [b"x"] * jobs)
            run = Run(("cold " if cold_idle_s > 0 else "warm ") + f"burst_check_s {burst_check_s:g}"
                      + (", host lost" if host_lost else ""))
            base = 1
            killed = False
            # The most the burst queue can have: after a host loss, the survivor's slots
            # less the low queue's minimum (the planner keeps minimums first).
            top = BURST_MAX if not host_lost else min(BURST_MAX, per_host - LOW_MIN)
            while True:
                now = time.monotonic() - start
                if host_lost and not killed and now >= KILL_AT_S:
                    os.killpg(masters["b"].pid, signal.SIGKILL)
                    killed = True
                slots = burst_slots()
                if killed and run.lost_to_replanned_s is None:
                    lost_at = _lost_at(work / "manager.log")
                    if lost_at is not None and slots >= top:
                        run.lost_to_replanned_s = max(0.0, time.time() - lost_at)
                if run.at_2x_s is None and slots >= 2 * base:
                    run.at_2x_s = now
                if run.at_4x_s is None and slots >= 4 * base:
                    run.at_4x_s = now
                if run.at_max_s is None and slots >= top:
                    run.at_max_s = now
                stats = client.stats("burst")["burst"]
                if stats.ready == 0 and stats.running == 0:
                    run.drained_s = now
                    break
                if now > 120:
                    break
                time.sleep(0.05)
            run.ideal_s = ideal_s(jobs, left=top if host_lost else None)
            run.map_to_work_ms = map_to_work_ms(work, hosts, since=time.time() - (time.monotonic() - start))
    return run


def ideal_s(jobs: int, *, left: int | None) -> float:
    """The drain time at BURST_MAX slots from the burst on; with `left`, at BURST_MAX until
    the kill and at `left` slots after it (the capacity left)."""
    if left is None or jobs * JOB_S / BURST_MAX <= KILL_AT_S:
        return jobs * JOB_S / BURST_MAX
    before = KILL_AT_S * BURST_MAX / JOB_S
    return KILL_AT_S + (jobs - before) * JOB_S / left


def map_to_work_ms(work: Path, hosts: list[str], *, since: float) -> list[float]:
    """Each slot that began burst work after `since`: ms from the last map its master got
    before that (the master's log line) to its first job."""
    maps = sorted(stamp for host in hosts for stamp in _stamps(work / f"master-{host}.log",
                                                               "slot map from the manager"))
    delays = []
    for line in (work / "burst_starts.txt").read_text().splitlines():
        began = float(line.split()[1])
        before = [stamp for stamp in maps if stamp <= began]
        if began >= since and before:
            delays.append(round((began - before[-1]) * 1000, 1))
    return delays


def _stamps(log: Path, text: str) -> list[float]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if text in line:
            with contextlib.suppress(ValueError):
                found.append(time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + int(line[20:23]) / 1000)
    return found


def _lost_at(log: Path) -> float | None:
    """The wall time of the manager's first "master ... silent ...: its slots are re-planned" line."""
    for line in log.read_text(errors="replace").splitlines():
        if "its slots are re-planned" in line:
            stamp = line[:23]
            with contextlib.suppress(ValueError):
                return time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:23]) / 1000
    return None


def _answers(address: str) -> bool:
    try:
        with QueueClient(address, connect_timeout_s=0.5, reconnect_attempts=0) as client:
            client.ping()
            return True
    except Exception:  # any failure means "not yet"
        return False


def show(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--host-lost", action="store_true")
    parser.add_argument("--low-backlog", type=int, default=20000,
                        help="jobs waiting in the low queue (0: its slots are idle when the burst comes)")
    parser.add_argument("--cold-idle-s", type=float, default=30.0,
                        help="the cold runs: seconds `burst` idles at its minimum, never used, before the burst")
    parser.add_argument("--modes", default="warm,cold,cold-off",
                        help="runs, in order: warm / cold (burst check 0.25 s), warm-off / cold-off (check off)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="planner-burst-"))
    runs = []
    for n, mode in enumerate(args.modes.split(",")):
        check = 0.0 if mode.endswith("-off") else 0.25
        cold = args.cold_idle_s if mode.startswith("cold") else 0.0
        runs.append(one_run(root / f"run{n}", jobs=args.jobs, burst_check_s=check, host_lost=args.host_lost,
                            low_backlog=args.low_backlog, cold_idle_s=cold))
    print("| run | 2x slots s | 4x slots s | max slots s | drained s | ideal s | drain / ideal "
          "| lost -> replanned s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for run in runs:
        ratio = "-" if run.drained_s is None else f"{run.drained_s / run.ideal_s:.2f}"
        print(f"| {run.label} | {show(run.at_2x_s)} | {show(run.at_4x_s)} | {show(run.at_max_s)} | "
              f"{show(run.drained_s)} | {run.ideal_s:.1f} | {ratio} | {show(run.lost_to_replanned_s)} |")
    for run in runs:
        print(f"{run.label}: map received -> slot's first job, ms: {run.map_to_work_ms}")
    print(json.dumps([run.__dict__ for run in runs]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
