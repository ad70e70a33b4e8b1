"""What one crash costs in CPU and page faults, A/B: a commit's code against the checkout's.

Both clusters (bench/crashes.py's: a queue server and a master) run side by side, and every
rep runs the 1% crashing run on each, ABBA. Around each run the master's /proc/PID/stat is
read: its own CPU and minor faults, and those of its children it reaped (the crashed slots:
their start, the good jobs before the crash, their exit), and the queue server's CPU.
Divided by the crashes of the run (each poison job crashes max_attempts times).

Usage: .venv/bin/python bench/crash_cost.py --base HEAD~1 [--reps 6] [--jobs 20000]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import frozen_copy
from crashes import QUEUE, Cluster, Runs, cluster, mixed, run
from end_to_end import Completions

MAX_ATTEMPTS = 3  # crashes.py's queue config: each poison job crashes this often
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Usage:
    cpu_s: float
    minflt: int
    children_cpu_s: float
    children_minflt: int

    @staticmethod
    def of(pid: int) -> Usage:
        # Fields after the command's closing parenthesis, from state (field 3) on.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        minflt, cminflt = int(fields[7]), int(fields[8])
        utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
        return Usage((utime + stime) * TICK_S, minflt, (cutime + cstime) * TICK_S, cminflt)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.cpu_s - other.cpu_s, self.minflt - other.minflt,
                     self.children_cpu_s - other.children_cpu_s, self.children_minflt - other.children_minflt)


@dataclass
class Side:
    name: str
    cluster: Cluster
    runs: Runs
    master_ms: list[float] = field(default_factory=list)
    master_faults: list[float] = field(default_factory=list)
    slot_ms: list[float] = field(default_factory=list)
    slot_faults: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)

    def measure(self, completions: Completions, datas: list[bytes], bad: int) -> None:
        master, server = Usage.of(self.cluster.master_pid), Usage.of(self.cluster.server_pid)
        run(self.cluster, completions, self.runs, datas, bad, QUEUE)
        crashes = bad * MAX_ATTEMPTS
        m, s = Usage.of(self.cluster.master_pid) - master, Usage.of(self.cluster.server_pid) - server
        self.master_ms.append(m.cpu_s * 1000 / crashes)
        self.master_faults.append(m.minflt / crashes)
        self.slot_ms.append(m.children_cpu_s * 1000 / crashes)
        self.slot_faults.append(m.children_minflt / crashes)
        self.server_ms.append(s.cpu_s * 1000 / crashes)

    def line(self) -> str:
        med = statistics.median
        return (f"{self.name:<10} {med(self.master_ms):>8.2f} {med(self.master_faults):>8.0f} "
                f"{med(self.slot_ms):>8.2f} {med(self.slot_faults):>8.0f} {med(self.server_ms):>8.2f} "
                f"{self.runs.rate:>10,.0f} {med(self.runs.dead_after_s):>8.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the A side: this commit's code")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--percent", type=float, default=1.0)
    parser.add_argument("--slots", type=int, default=2)
    args = parser.parse_args()
    completions = Completions()
    root = Path(tempfile.mkdtemp(prefix="sm-crash-cost-"))
    env = dict(os.environ, BENCH_UDP_PORT=str(completions.port), PYTHONUNBUFFERED="1", BENCH_JOB_MS="0")
    datas, bad = mixed(args.jobs, args.percent, b"crash")
    load_at_start = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        base = stack.enter_context(cluster("base", Path(frozen_copy(args.base)), root / "base", env, args.slots))
        new = stack.enter_context(cluster("checkout", Path(frozen_copy(None)), root / "new", env, args.slots))
        sides = [Side(f"base {args.base}"[:10], base, Runs("base", args.jobs - bad)),
                 Side("checkout", new, Runs("checkout", args.jobs - bad))]
        for rep in range(args.reps):
            for side in sides if rep % 2 == 0 else sides[::-1]:  # ABBA
                side.measure(completions, datas, bad)
    print(f"\n{args.jobs} jobs, {bad} crashing ({bad * MAX_ATTEMPTS} crashes a run), {args.slots} slots; "
          f"median of {args.reps} ABBA; per crash; load {load_at_start:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"{'side':<10} {'master ms':>8} {'faults':>8} {'slots ms':>8} {'faults':>8} {'server ms':>8} "
          f"{'good/s':>10} {'dead s':>8}")
    for side in sides:
        print(side.line())
    for side in sides:
        print(f"per rep, {side.name}: master ms {', '.join(f'{v:.2f}' for v in side.master_ms)}; "
              f"master faults {', '.join(f'{v:.0f}' for v in side.master_faults)}; "
              f"slot ms {', '.join(f'{v:.2f}' for v in side.slot_ms)}; "
              f"slot faults {', '.join(f'{v:.0f}' for v in side.slot_faults)}")
    print(f"logs in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
