"""Queue server benchmark: our server against beanstalkd, measured in the same run.

Both servers are driven by the same raw-socket client (bench/rawclient.py):
one Python client process, loopback, 32-byte jobs, --jobs jobs per run
(20,000), every figure the median of --reps runs (3). The runs of the two
servers are interleaved (ours, ours deep, beanstalkd, beanstalkd deep, ours,
...) so that load from other work on the machine falls on all alike; ratios
are medians of per-rep ratios.

Measurements (see --help for the options; README of the method in
bench/RESULTS.md):
  empty   one request at a time: PUT/s, GET+DONE jobs/s (ours --fsync never)
          vs beanstalkd put, reserve+delete; pipelined PUT 1,000 at a time;
          batched `GET q COUNT 100` + multi-id DONE vs beanstalkd pipelined
          reserve+delete (1,000 at a time)
  fsync   ours --fsync always vs beanstalkd -b DIR -f 0: PUT round trips,
          16 concurrent connections with one PUT in flight each (one process,
          16 sockets on epoll), pipelined PUT
  depth   every rate above again with --depth jobs (1,000,000) already queued
          in the measured queue, as a ratio to the empty-server rate; memory
          per queued job (RSS full - RSS empty) / jobs - 32
  seed    the sockPQd manual's own test (bench/seed_test.py)
  profile py-spy on our server under pipelined PUT load (and batched GET, and
          GET+DONE round trips), top functions by own and inclusive samples

Usage:
  .venv/bin/python bench/queue_server.py                 # everything
  .venv/bin/python bench/queue_server.py --quick         # smoke run, ~1 min
  .venv/bin/python bench/queue_server.py --write-results # append to bench/RESULTS.md
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers
from queue_server_measure import Bench, log
from queue_server_profile import run_profile, run_seed
from queue_server_report import (
    build_rows,
    machine_info,
    render_table,
    samples_detail,
    write_results,
)

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE / "RESULTS.md"

SECTIONS = ("empty", "fsync", "depth", "seed", "profile")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Queue server vs beanstalkd benchmark",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("Usage:", 1)[1])
    ap.add_argument("--jobs", type=int, help="jobs per measured run (default 20,000)")
    ap.add_argument("--reps", type=int, help="runs per figure, median reported (default 3)")
    ap.add_argument("--depth", type=int, help="jobs preloaded for the depth section (1,000,000)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent connections (16)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2,000 jobs, 3 reps, depth 50,000, seed 3 x 2,000, 2 s profile")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"comma list out of {','.join(SECTIONS)} (default all)")
    ap.add_argument("--no-profile", action="store_true", help="skip the py-spy profile")
    ap.add_argument("--profile-seconds", type=int, help="py-spy duration per load (8 s)")
    ap.add_argument("--profile-top", type=int, default=10)
    ap.add_argument("--seed-fsync", default="never", help="our --fsync for the seed test (never)")
    ap.add_argument("--beanstalkd", help="path to beanstalkd (default: PATH)")
    ap.add_argument("--no-beanstalkd", action="store_true", help="skip the beanstalkd peer")
    ap.add_argument("--no-ours", action="store_true", help="skip our server (peer only)")
    ap.add_argument("--ours-cmd", help="command that replaces `.venv/bin/slotmap` to start our "
                    "server (it gets `queue-server --listen H:P --data-dir D --fsync M`)")
    ap.add_argument("--live-code", action="store_true",
                    help="run our server from the checkout itself instead of a copy frozen at "
                    "the start (the checkout may change under a long run)")
    ap.add_argument("--tmp-root", help="where data dirs go (default: the system temp dir)")
    ap.add_argument("--write-results", nargs="?", const=str(RESULTS_MD), metavar="PATH",
                    help=f"add a markdown section to PATH (default {RESULTS_MD.relative_to(peers.REPO)})")
    ap.add_argument("--json", metavar="PATH", help="write every sample as JSON")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    q = a.quick
    a.jobs = a.jobs or (2_000 if q else 20_000)
    a.reps = a.reps or 3
    a.depth = a.depth or (50_000 if q else 1_000_000)
    a.profile_seconds = a.profile_seconds or (2 if q else 8)
    a.profile_get_jobs = 200_000 if q else 1_000_000
    a.sections = [s.strip() for s in a.sections.split(",") if s.strip()]
    bad = [s for s in a.sections if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {bad}; choose from {SECTIONS}")
    if a.no_profile and "profile" in a.sections:
        a.sections.remove("profile")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    peers.install_cleanup()
    peers.set_tmp_root(a.tmp_root)
    b = Bench(a)
    if a.ours_cmd:
        peers.SLOTMAP_CMD = a.ours_cmd.split()
    b.values_str["fs_type"] = peers.fs_type(a.tmp_root or tempfile.gettempdir())
    b.values_str["code"] = peers.code_state()
    if not (a.ours_cmd or a.live_code or a.no_ours):
        peers.freeze_code()
        b.values_str["code"] += " (frozen copy taken at the start)"
    elif a.live_code:
        b.values_str["code"] += " (live checkout: may change during the run)"
    if not a.no_beanstalkd:
        b.bs_path = peers.find_beanstalkd(a.beanstalkd)
        if not b.bs_path:
            log(peers.BEANSTALKD_INSTALL_HINT)
            b.notes.append("beanstalkd not installed: peer skipped "
                           "(apt-get update && apt-get install -y beanstalkd)")
    info = machine_info()
    cmdline = " ".join([".venv/bin/python", "bench/queue_server.py"] + (sys.argv[1:] if argv is None else argv))
    log(f"{info['uname']}\nCPU {info['cpu']}, {info['cores']} cores; load {os.getloadavg()}")
    log(f"server code: {b.values_str['code']}")
    t_start = time.monotonic()
    busy0 = peers.machine_busy_seconds()
    cpu0 = sum(os.times()[:2])
    try:
        if "empty" in a.sections or "depth" in a.sections:
            b.section("in memory" + (" (empty and deep)" if "depth" in a.sections else ""),
                      b.run_inmem)
        b.section("fsync", b.run_fsync)
        b.section("seed", lambda: run_seed(b))
        b.section("profile", lambda: run_profile(b))
    finally:
        peers.stop_all()
        peers.remove_code_snapshot()
    elapsed = time.monotonic() - t_start
    busy = peers.machine_busy_seconds() - busy0
    mine = sum(os.times()[:2]) - cpu0 + peers.server_cpu_seconds
    other = max(0.0, busy - mine) / elapsed if elapsed else 0.0
    shared = other > 0.15
    load_note = (f"machine {'SHARED' if shared else 'not noticeably shared'} during the run: "
                 f"other processes used {other:.2f} of {os.cpu_count()} cores on average "
                 f"(this benchmark's client and servers: {mine / elapsed:.2f}); "
                 f"load average at the end {os.getloadavg()[0]:.2f}")
    rows = build_rows(b)
    print()
    print(render_table(rows, markdown=False))
    print()
    print(load_note)
    for n in b.notes:
        print("note: " + n)
    if b.errors:
        print("\nerrors:")
        for e in b.errors:
            print("  " + e)
    for r in b.seed.values():
        print("\nseed test " + r.summary())
    for txt in b.profile.values():
        print("\nprofile " + txt)
    if a.verbose:
        print("\n" + samples_detail(b))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"samples": b.samples, "values": b.values, "errors": b.errors,
                       "info": info, "load_note": load_note,
                       "seed": {k: {"put": v.put_rounds, "get": v.get_rounds}
                                for k, v in b.seed.items()},
                       "profile": b.profile}, f, indent=1)
    if a.write_results:
        write_results(b, rows, info, Path(a.write_results), cmdline, load_note, elapsed)
        print(f"\nwritten to {a.write_results}")
    return 1 if b.errors else 0


if __name__ == "__main__":
    sys.exit(main())
