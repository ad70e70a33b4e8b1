"""Failover with jobs running (issue 25): `slotmap run --replicas 1` with N jobs of S seconds
on K slots; the primary queue server killed with SIGKILL while at least 3 run. Reports what
was lost, what ran again, the attempts charged, and the time from the kill to each running
job's acknowledgement (its key finished on the new primary); goal in sync mode: 0 / 0 / 0 and
all within 15 s. Then the same in async mode, with what it lost or ran again.

    python bench/failover_inflight.py                       # sync and async, 60 jobs of 1.5 s on 5 slots
    python bench/failover_inflight.py --mode sync --runs 3

Real processes: the launcher starts the queue server, its replica, the manager (sentinel),
the pulsar and a master whose slots run bench/failover_inflight_handlers.py; it starts the
killed server again (it follows the new primary). tests/deploy/test_inflight_failover.py
runs the same scenario, smaller.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from queue_server.client import QueueClient  # noqa: E402


def _end_to_end() -> ModuleType:
    """bench/end_to_end.py, by path under the name tests/deploy/test_run_failover.py gives it
    (bench/ is not put on sys.path: its modules' names would shadow others in a test run)."""
    name = "sm_bench_end_to_end"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "end_to_end.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


process_group = _end_to_end().process_group

STEP_S = 60.0  # each step's deadline, for a loaded machine
LOCK_S = 60.0  # the queue's lock: a job left to it comes back 60 s after the kill
QUEUE = "inflight"
ACK_GOAL_S = 15.0


def free_port_pair() -> int:
    """A free port whose next one is free too (the replica listens on port + 1)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port < 65535:
            with contextlib.suppress(OSError), socket.socket() as second:
                second.bind(("127.0.0.1", port + 1))
                return port
    raise RuntimeError("no two free ports in a row")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def role(address: str) -> list[str]:
    """ROLE's words after `200 OK`; [] if the server does not answer."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2.0) as sock:
            sock.sendall(b"ROLE\r\n")
            words = sock.makefile("rb").readline().decode().split()
    except OSError:
        return []
    return words[2:] if words[:2] == ["200", "OK"] else []


def wait_for(predicate, what, timeout_s: float = STEP_S, interval_s: float = 0.02):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(what() if callable(what) else what)
        time.sleep(interval_s)
    return value


@dataclass
class Cluster:
    """A running `slotmap run --replicas 1` with the inflight queue."""

    root: Path
    launcher: subprocess.Popen[bytes]
    primary: str
    replica: str
    job_log: Path

    @property
    def servers(self) -> list[str]:
        return [self.primary, self.replica]

    def log(self) -> str:
        return (self.root / "run.out").read_text(errors="replace")

    def part_logs(self) -> str:
        """The children's logs (var/log/*.log)."""
        return "".join(path.read_text(errors="replace") for path in sorted((self.root / "var" / "log").glob("*.log")))

    def primary_pid(self) -> int:
        return int(re.findall(r"started queue-server \(pid (\d+)\)", self.log())[0])

    def client(self) -> QueueClient:
        return QueueClient(self.servers, timeout_s=10.0, connect_timeout_s=1.0, offline_wait_s=STEP_S)


@contextlib.contextmanager
def launched(root: Path, *, slots: int, replicate: str = "sync", lock_s: float = LOCK_S) -> Iterator[Cluster]:
    """`slotmap run --replicas 1 --no-producer` in `root`, the inflight queue on `slots`
    slots; up and its primary leased with its replica linked when yielded."""
    port = free_port_pair()
    primary, replica = f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"
    config = root / "cluster.toml"
    from deploy.replicas import to_toml

    config.write_text(to_toml({
        "queue_server": {"listen": primary, "fsync": "never", "replicate": replicate},
        "queues": {QUEUE: {"min_slots": slots, "max_slots": slots, "lock_timeout_s": lock_s,
                           "batch_size": 1}},
        "master": {"ipc_dir": "./var/ipc", "max_slots": slots, "max_load_per_cpu": 1000.0,
                   "stop_deadline_s": 5.0, "python_path": [str(REPO / "bench")],
                   "handler_modules": ["failover_inflight_handlers"]},
        "manager": {"listen": f"tcp://127.0.0.1:{free_port()}", "plan_interval_s": 1.0},
        "pulsar": {"listen": f"tcp://127.0.0.1:{free_port()}"},
        "admin": {"listen": f"127.0.0.1:{free_port()}"},
    }))
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    slotmap = Path(sys.executable).with_name("slotmap")
    command = [*([str(slotmap)] if slotmap.exists() else [sys.executable, "-m", "deploy.cli"]),
               "run", "--config", str(config), "--replicas", "1", "--no-producer"]
    with process_group(command, env=env, log=root / "run.out", cwd=root, stop_deadline_s=30.0) as launcher:
        cluster = Cluster(root, launcher, primary, replica, root / "jobs.log")
        wait_for(lambda: "the cluster is up" in cluster.log() or launcher.poll() is not None,
                 lambda: f"the cluster up\n{cluster.log()}")
        if launcher.poll() is not None:
            raise RuntimeError(f"slotmap run exited\n{cluster.log()}")
        wait_for(lambda: (r := role(primary))[:1] == ["primary"] and r[5] == "held" and r[2] == "1",
                 lambda: f"the primary leased with its replica: {role(primary)}")
        yield cluster


@dataclass
class Outcome:
    """What one failover did to the jobs."""

    jobs: int
    running_at_kill: list[str]
    # seconds from the kill to each running job's acknowledgement (None: not within the wait)
    ack_s: dict[str, float | None]
    starts: dict[str, list[int]] = field(default_factory=dict)  # key -> attempts it started with
    done: set[str] = field(default_factory=set)
    lost: list[str] = field(default_factory=list)
    unacknowledged_logs: int = 0  # master/slot lines "could not acknowledge"
    stuck_logs: int = 0  # slot lines "cannot fetch from ... retrying"

    @property
    def rerun(self) -> list[str]:
        return sorted(key for key, attempts in self.starts.items() if len(attempts) > 1)

    @property
    def charged(self) -> int:
        return sum(max(attempts) - 1 for attempts in self.starts.values() if attempts)

    def line(self, mode: str) -> str:
        acks = [s for s in self.ack_s.values() if s is not None]
        late = sum(1 for s in self.ack_s.values() if s is None or s > ACK_GOAL_S)
        worst = f"{max(acks):.2f}" if acks else "-"
        return (f"{mode}: {self.jobs} jobs, {len(self.running_at_kill)} running at the kill: lost "
                f"{len(self.lost)}, re-run {len(self.rerun)}, attempts charged {self.charged}; "
                f"kill -> ack of the running: max {worst} s, {late} over {ACK_GOAL_S:g} s "
                f"(each: {', '.join(f'{s:.2f}' if s is not None else 'never' for s in sorted(self.ack_s.values(), key=lambda v: v or 1e9))}); "
                f"'could not acknowledge' lines {self.unacknowledged_logs}, 'cannot fetch' lines {self.stuck_logs}")


def job_events(path: Path) -> list[tuple[str, str, int, float]]:
    """(event, key, attempt, unix time) of each line of the handlers' log."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        event, key, attempt, at = line.split()
        events.append((event, key, int(attempt) if attempt != "None" else 0, float(at)))
    return events


def running_now(path: Path) -> list[str]:
    """Keys started and not ended, by the handlers' log."""
    open_runs: dict[str, int] = defaultdict(int)
    for event, key, _, _ in job_events(path):
        open_runs[key] += 1 if event == "start" else -1
    return sorted(key for key, count in open_runs.items() if count > 0)


def fail_over_with_jobs_running(cluster: Cluster, *, jobs: int, job_s: float, running: int = 3,
                                done_before: int = 0, wait_s: float = STEP_S,
                                after_start_s: float = 0.3) -> Outcome:
    """Put `jobs` keyed jobs, kill -9 the primary once `running` run (and `done_before` are
    done) and the last job started `after_start_s` ago, then follow every job to its end,
    within `wait_s` after the kill. `after_start_s` 0 kills as a hand-out may be under way:
    a hand-out whose reply dies with the primary is the case a slot cannot mend
    (docs/DESIGN.md, "Work in flight")."""
    keys = [f"job-{i}" for i in range(jobs)]
    with cluster.client() as client:
        for key in keys:
            client.put(QUEUE, json.dumps({"sleep_s": job_s, "log": str(cluster.job_log)}), key=key)

    def ready_to_kill() -> list[str] | None:
        events = job_events(cluster.job_log)
        ended = sum(1 for event, *_ in events if event == "end")
        last_start = max((at for event, _, _, at in events if event == "start"), default=0.0)
        now = running_now(cluster.job_log)
        settled = time.time() - last_start >= after_start_s
        return now if len(now) >= running and ended >= done_before and settled else None

    running_keys = wait_for(ready_to_kill, lambda: f"{running} jobs running\n{cluster.part_logs()[-3000:]}",
                            interval_s=0.005)
    os.kill(cluster.primary_pid(), signal.SIGKILL)
    killed_at = time.time()
    outcome = Outcome(jobs, running_keys, dict.fromkeys(running_keys))
    deadline = time.monotonic() + wait_s
    with cluster.client() as client:
        while time.monotonic() < deadline:
            for key in outcome.running_at_kill:
                if outcome.ack_s[key] is None and _gone(client, key):
                    outcome.ack_s[key] = time.time() - killed_at
            if all(s is not None for s in outcome.ack_s.values()) and _all_done(client, keys):
                break
            time.sleep(0.05)
        outcome.done = {key for key in keys if _gone(client, key)}
    for event, key, attempt, _ in job_events(cluster.job_log):
        if event == "start":
            outcome.starts.setdefault(key, []).append(attempt)
    outcome.lost = sorted(key for key in keys if key not in outcome.done and key not in outcome.starts)
    logs = cluster.part_logs()
    outcome.unacknowledged_logs = logs.count("could not acknowledge")
    outcome.stuck_logs = len(re.findall(r"cannot fetch from \S+: .*retrying", logs))
    return outcome


def _gone(client: QueueClient, key: str) -> bool:
    """The job is acknowledged: JOB finds it finished (kept, issue 26) or no job under its key."""
    try:
        info = client.job(key)
    except (OSError, Exception):
        return False
    return info is None or info.state == "done"


def _all_done(client: QueueClient, keys: list[str]) -> bool:
    try:
        total = client.total(QUEUE)
    except Exception:
        return False
    return total.jobs == 0 and total.running == 0 and all(_gone(client, key) for key in keys[-3:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("sync", "async", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--slots", type=int, default=5)
    parser.add_argument("--job-s", type=float, default=1.5)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--after-start-s", type=float, default=0.3,
                        help="kill this long after the last job started (0: as hand-outs go on)")
    parser.add_argument("--lock-s", type=float, default=LOCK_S,
                        help="the queue's lock; below the job time, the masters' renewals keep the jobs")
    parser.add_argument("--wait-s", type=float, default=LOCK_S + 40.0,
                        help="how long to follow the jobs after the kill (past the lock: re-runs show)")
    args = parser.parse_args()
    modes = ("sync", "async") if args.mode == "both" else (args.mode,)
    failed = False
    for mode in modes:
        for run in range(args.runs):
            tmp = Path(tempfile.mkdtemp(prefix="sm-inflight-"))
            with launched(tmp, slots=args.slots, replicate=mode, lock_s=args.lock_s) as cluster:
                outcome = fail_over_with_jobs_running(cluster, jobs=args.jobs, job_s=args.job_s,
                                                      done_before=args.slots, wait_s=args.wait_s,
                                                      after_start_s=args.after_start_s)
            print(f"run {run + 1}: {outcome.line(mode)}", flush=True)
            bad = bool(outcome.rerun or outcome.lost or outcome.charged)
            if bad:
                charged = sorted(key for key, attempts in outcome.starts.items() if max(attempts) > 1)
                print(f"  re-run {outcome.rerun}, lost {outcome.lost}, charged {charged}; logs kept "
                      f"in {tmp}", flush=True)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
            failed |= mode == "sync" and bad
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
