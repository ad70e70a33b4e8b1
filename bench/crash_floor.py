"""The floor under a crash's cost: what fork + `_exit` + `waitpid` alone cost a process holding
nothing, the slot's imports, or the master's, and the best 1%-crashing ratio that floor allows.

Why: issue 15's goal is good jobs at >= 0.8x the all-good rate with 1% of jobs calling
`os._exit`. Every crash ends a slot process and a new one must be forked, so each costs at
least one fork and exit of a process holding the slot's code, whoever forks it (the master
now; a fork server would hold the same imports). This prints that floor next to the all-good
run's time, so the ceiling on the ratio is a measurement, not an opinion:

    ceiling = run_s / (run_s + crashes * floor_cpu_s / cores)

Usage: .venv/bin/python bench/crash_floor.py [--forks 300] [--run-s 0.42] [--crashes 200]
(--run-s: the all-good run of bench/crashes.py, 20,000 no-op jobs, on this machine.)
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

IMPORTS = {
    "bare": "",
    "slot": "import slot.loop, slot.beacon, queue_server.client",
    "master": "import master.cli, slot.loop, slot.beacon, queue_server.client",
}

PROBE = '''
import gc, os, resource, sys, time
{imports}
gc.freeze()
forks = int(sys.argv[1])


def spent():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, own.ru_minflt + kids.ru_minflt


cpu0, faults0 = spent()
wall0 = time.perf_counter()
for _ in range(forks):
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    os.waitpid(pid, 0)
cpu1, faults1 = spent()
rss_mb = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
print((cpu1 - cpu0) / forks, (time.perf_counter() - wall0) / forks, (faults1 - faults0) / forks, rss_mb)
'''


def probe(imports: str, forks: int) -> tuple[float, float, float, float]:
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", PROBE.format(imports=imports), str(forks)],
                         cwd=root, capture_output=True, text=True, check=True).stdout.split()
    cpu_s, wall_s, faults, rss_mb = (float(x) for x in out)
    return cpu_s, wall_s, faults, rss_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--forks", type=int, default=300)
    parser.add_argument("--run-s", type=float, default=0.42, help="the all-good run's time, s")
    parser.add_argument("--crashes", type=int, default=200)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    print(f"load {os.getloadavg()[0]:.2f}, {cores} cores, {args.forks} forks each")
    print("| process holds | RSS MB | CPU ms a fork+exit | wall ms | faults | ceiling on the ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, imports in IMPORTS.items():
        cpu_s, wall_s, faults, rss_mb = probe(imports, args.forks)
        ceiling = args.run_s / (args.run_s + args.crashes * cpu_s / cores)
        print(f"| {name} | {rss_mb:.0f} | {cpu_s * 1e3:.2f} | {wall_s * 1e3:.2f} | {faults:.0f} | {ceiling:.2f}x |")


if __name__ == "__main__":
    main()
