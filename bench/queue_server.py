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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers
import rawclient as rc
import seed_test
from queue_server_report import (
    build_rows,
    machine_info,
    render_table,
    samples_detail,
    top_functions,
    write_results,
)

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE / "RESULTS.md"

# Figures measured here before (shared/PEERS.md), shown next to ours for context.

def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Bench:
    args: argparse.Namespace
    samples: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    values: dict[str, float] = field(default_factory=dict)
    values_str: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # skipped peers/tools: no failure
    seed: dict[str, seed_test.SeedResult] = field(default_factory=dict)
    profile: dict[str, str] = field(default_factory=dict)
    bs_path: str | None = None

    # ---------------------------------------------------------------- utils
    def med(self, key: str) -> float | None:
        v = self.samples.get(key)
        return statistics.median(v) if v else None

    def ratio(self, num: str, den: str) -> float | None:
        """Median of the per-rep ratios (rep i of num / rep i of den): the runs of
        one rep were made seconds apart, so load from other work on the machine
        mostly cancels out. Falls back to the ratio of medians."""
        a, b = self.samples.get(num), self.samples.get(den)
        if not a or not b:
            return None
        if len(a) == len(b):
            return statistics.median(x / y for x, y in zip(a, b, strict=True))
        return statistics.median(a) / statistics.median(b)

    def timed(self, key: str, fn: Callable[[], int]) -> float:
        t0 = time.perf_counter()
        n = fn()
        dt = time.perf_counter() - t0
        rate = n / dt
        self.samples[key].append(rate)
        if self.args.verbose:
            log(f"    {key}: {rate:,.0f}/s")
        return rate

    def section(self, name: str, fn: Callable[[], None]) -> None:
        if name.split(" ")[0] not in self.args.sections and not name.startswith("in memory"):
            return
        log(f"== {name}")
        t0 = time.monotonic()
        try:
            fn()
        except Exception as exc:
            msg = f"section {name}: {type(exc).__name__}: {exc}"
            self.errors.append(msg)
            log("ERROR " + msg)
            if self.args.verbose:
                traceback.print_exc()
        finally:
            peers.stop_all()
        log(f"   ({time.monotonic() - t0:.0f} s)")

    def start_ours(self, fsync: str) -> peers.ManagedServer | None:
        if self.args.no_ours:
            return None
        try:
            return peers.start_slotmap(fsync)
        except Exception as exc:
            msg = f"our server (--fsync {fsync}) not available: {exc}"
            self.errors.append(msg)
            log("ERROR " + msg)
            return None

    def start_bs(self, **kw: object) -> peers.ManagedServer | None:
        if not self.bs_path:
            return None
        return peers.start_beanstalkd(self.bs_path, **kw)  # type: ignore[arg-type]

    # ---------------------------------------------------------- sequences
    def warm_ours(self, c: rc.Conn) -> None:
        rc.ours_put_rt(c, 1000)
        rc.ours_getdone_rt(c, 1000)
        rc.ours_put_pipe(c, 5000)
        rc.ours_get_batch(c, 5000, 100, 10)
        rc.ours_drain(c)

    def warm_bs(self, c: rc.Conn) -> None:
        rc.bs_put_rt(c, 1000)
        rc.bs_reserve_delete_rt(c, 1000)
        rc.bs_put_pipe(c, 5000)
        rc.bs_reserve_delete_pipe(c, 5000)
        rc.bs_drain(c)

    def seq_ours_mem(self, c: rc.Conn, sfx: str) -> None:
        n = self.args.jobs
        self.timed(f"ours_put_rt{sfx}", lambda: rc.ours_put_rt(c, n))
        self.timed(f"ours_gd_rt{sfx}", lambda: rc.ours_getdone_rt(c, n))
        self.timed(f"ours_put_pipe{sfx}", lambda: rc.ours_put_pipe(c, n, 1000))
        self.timed(f"ours_batch10{sfx}", lambda: rc.ours_get_batch(c, n, 100, 10))
        rc.ours_put_pipe(c, n, 1000)
        self.timed(f"ours_batch1{sfx}", lambda: rc.ours_get_batch(c, n, 100, 1))

    def seq_floor(self, c: rc.Conn) -> None:
        n = self.args.jobs
        self.timed("floor_put_rt", lambda: rc.ours_put_rt(c, n))
        self.timed("floor_gd_rt", lambda: rc.ours_getdone_rt(c, n))

    def seq_bs_mem(self, c: rc.Conn, sfx: str) -> None:
        n = self.args.jobs
        self.timed(f"bs_put_rt{sfx}", lambda: rc.bs_put_rt(c, n))
        self.timed(f"bs_rd_rt{sfx}", lambda: rc.bs_reserve_delete_rt(c, n))
        self.timed(f"bs_put_pipe{sfx}", lambda: rc.bs_put_pipe(c, n, 1000))
        self.timed(f"bs_rd_pipe{sfx}", lambda: rc.bs_reserve_delete_pipe(c, n, 1000))

    def seq_ours_fsync(self, srv: peers.ManagedServer, c: rc.Conn, sfx: str) -> None:
        n = self.args.jobs
        self.timed(f"ours_always_put_rt{sfx}", lambda: rc.ours_put_rt(c, n))
        # durable GET+DONE one at a time is slow (2 fsyncs per job): a quarter of the jobs
        self.timed(f"ours_always_gd_rt{sfx}", lambda: rc.ours_getdone_rt(c, n // 4))
        self.samples[f"ours_always_conc{sfx}"].append(self.conc(srv, "ours"))
        rc.ours_get_batch(c, n - n // 4, 100, 10)
        self.timed(f"ours_always_put_pipe{sfx}", lambda: rc.ours_put_pipe(c, n, 1000))
        rc.ours_get_batch(c, n, 100, 10)

    def seq_bs_fsync(self, srv: peers.ManagedServer, c: rc.Conn, sfx: str) -> None:
        n = self.args.jobs
        self.timed(f"bs_f0_put_rt{sfx}", lambda: rc.bs_put_rt(c, n))
        self.timed(f"bs_f0_rd_rt{sfx}", lambda: rc.bs_reserve_delete_rt(c, n // 4))
        self.samples[f"bs_f0_conc{sfx}"].append(self.conc(srv, "bs"))
        rc.bs_reserve_delete_pipe(c, n - n // 4, 1000)
        self.timed(f"bs_f0_put_pipe{sfx}", lambda: rc.bs_put_pipe(c, n, 1000))
        rc.bs_reserve_delete_pipe(c, n, 1000)

    def conc(self, srv: peers.ManagedServer, kind: str) -> float:
        if kind == "ours":
            req, ok = rc.ours_put_request("bench"), b"200"
        else:
            req, ok = rc.bs_put_request(), b"INSERTED"
        n, dt = rc.concurrent_put(srv.host, srv.port, self.args.jobs, self.args.clients, req,
                                  ok_prefix=ok)
        if self.args.verbose:
            log(f"    {kind} {self.args.clients} clients: {n / dt:,.0f}/s")
        return n / dt

    def interleave(self, pairs: list[tuple[rc.Conn | None, Callable[[rc.Conn], None]]]) -> None:
        for rep in range(self.args.reps):
            log(f"   rep {rep + 1}/{self.args.reps}")
            for conn, fn in pairs:
                if conn is not None:
                    fn(conn)

    # ------------------------------------------------------------ sections
    def _conn(self, srv: peers.ManagedServer | None) -> rc.Conn | None:
        return rc.Conn(srv.host, srv.port) if srv else None

    def run_inmem(self) -> None:
        """Ours --fsync never and beanstalkd in memory; with the depth section, a
        second server of each kind preloaded with --depth jobs runs alongside and
        the reps go round all of them (ours, ours deep, beanstalkd, beanstalkd
        deep), so a deep/empty ratio compares runs made seconds apart."""
        deep = "depth" in self.args.sections
        ours, bs = self.start_ours("never"), self.start_bs()
        ours_d = self.start_ours("never") if deep and ours else None
        bs_d = self.start_bs() if deep and bs else None
        floor = peers.start_floor()
        conns = [self._conn(x) for x in (ours, ours_d, bs, bs_d, floor)]
        co, cod, cb, cbd, cf = conns
        try:
            for c, warm in ((co, self.warm_ours), (cod, self.warm_ours),
                            (cb, self.warm_bs), (cbd, self.warm_bs)):
                if c:
                    warm(c)
            if cod and ours_d:
                self.mem(ours_d, "mem_ours_empty")
                self.fill("ours", cod, lambda c, n, b: rc.ours_put_pipe(c, n, b))
                self.mem(ours_d, "mem_ours_full")
            if cbd and bs_d:
                self.mem(bs_d, "mem_bs_empty")
                self.fill("bs", cbd, lambda c, n, b: rc.bs_put_pipe(c, n, b))
                self.mem(bs_d, "mem_bs_full")
            self.interleave([(co, lambda c: self.seq_ours_mem(c, "")),
                             (cod, lambda c: self.seq_ours_mem(c, "_deep")),
                             (cb, lambda c: self.seq_bs_mem(c, "")),
                             (cbd, lambda c: self.seq_bs_mem(c, "_deep")),
                             (cf, self.seq_floor)])
            if co:
                self.check_total_ours(co, "in memory, empty", 0)
            if cod:
                self.check_total_ours(cod, "in memory, deep", self.args.depth)
        finally:
            for c in conns:
                if c:
                    c.close()

    def run_fsync(self) -> None:
        """Ours --fsync always and beanstalkd -b DIR -f 0, empty and (with the
        depth section) deep, reps interleaved as in run_inmem."""
        deep = "depth" in self.args.sections
        ours = self.start_ours("always")
        bs = self.start_bs(binlog=True, fsync_ms=0) if self.bs_path else None
        ours_d = self.start_ours("always") if deep and ours else None
        bs_d = None
        if deep and self.bs_path:
            # load beanstalkd's binlog without fsync, then restart it with -f 0 on it
            wd = peers.make_tmpdir("beanstalkd-f0")
            b1 = peers.start_beanstalkd(self.bs_path, binlog=True, never_fsync=True, workdir=wd)
            with rc.Conn(b1.host, b1.port) as c:
                self.warm_bs(c)
                self.fill("bs_f0", c, lambda c, n, b: rc.bs_put_pipe(c, n, b))
            b1.stop(remove=False)
            t0 = time.monotonic()
            bs_d = peers.start_beanstalkd(self.bs_path, binlog=True, fsync_ms=0, workdir=wd,
                                          name="beanstalkd -f 0")
            log(f"   beanstalkd -f 0 restarted on the binlog in {time.monotonic() - t0:.1f} s")
        conns = [self._conn(x) for x in (ours, ours_d, bs, bs_d)]
        co, cod, cb, cbd = conns
        try:
            if cbd:
                st = rc.bs_stats_tube(cbd, "default")
                log(f"   beanstalkd -f 0 holds {st.get('current-jobs-ready')} ready jobs")
            for c, warm in ((co, self.warm_ours), (cod, self.warm_ours), (cb, self.warm_bs)):
                if c:
                    warm(c)
            if cod:
                self.fill("ours_always", cod, lambda c, n, b: rc.ours_put_pipe(c, n, b))
            self.interleave([(co, lambda c: self.seq_ours_fsync(ours, c, "")),
                             (cod, lambda c: self.seq_ours_fsync(ours_d, c, "_deep")),
                             (cb, lambda c: self.seq_bs_fsync(bs, c, "")),
                             (cbd, lambda c: self.seq_bs_fsync(bs_d, c, "_deep"))])
        finally:
            for c in conns:
                if c:
                    c.close()

    def fill(self, label: str, c: rc.Conn, put_pipe: Callable[[rc.Conn, int, int], int]) -> None:
        depth = self.args.depth
        t0 = time.perf_counter()
        done = 0
        step = 100_000
        while done < depth:
            k = min(step, depth - done)
            put_pipe(c, k, 1000)
            done += k
            if self.args.verbose:
                log(f"    {label} filled {done:,}")
        dt = time.perf_counter() - t0
        self.values[f"{label}_fill_rate"] = depth / dt
        log(f"   {label}: {depth:,} jobs loaded in {dt:.1f} s ({depth / dt:,.0f}/s)")

    def mem(self, srv: peers.ManagedServer, key: str) -> None:
        time.sleep(0.5)
        m = peers.memory_kb(srv.pid)
        for k, v in m.items():
            self.values[f"{key}_{k}"] = v

    def run_seed(self) -> None:
        rounds, per_round = seed_test.VARIANTS["linked"]
        if self.args.quick:
            rounds, per_round = 3, 2_000
        ours = self.start_ours(self.args.seed_fsync)
        if ours:
            log(f"   seed test on ours ({rounds} x {per_round:,})")
            self.seed["ours"] = seed_test.run_ours(ours.host, ours.port, rounds, per_round,
                                                   progress=self.args.verbose)
            ours.stop()
        if self.bs_path:
            bs = self.start_bs()
            assert bs is not None
            log(f"   seed test on beanstalkd ({rounds} x {per_round:,})")
            self.seed["bs"] = seed_test.run_beanstalkd(bs.host, bs.port, rounds, per_round,
                                                       progress=self.args.verbose)
            bs.stop()

    def run_profile(self) -> None:
        pyspy = shutil.which("py-spy") or str(peers.REPO / ".venv" / "bin" / "py-spy")
        if not os.access(pyspy, os.X_OK):
            self.notes.append("profile skipped: py-spy not found (.venv/bin/pip install py-spy)")
            return
        ours = self.start_ours("never")
        if not ours:
            return
        secs = self.args.profile_seconds
        for load in ("put", "get", "rt"):
            out = os.path.join(ours.workdir, f"profile-{load}.txt")
            with rc.Conn(ours.host, ours.port) as c:
                self.warm_ours(c)
                if load != "put":
                    pre = self.args.profile_get_jobs if load == "get" else 100_000
                    rc.ours_put_pipe(c, pre, 1000)
                cmd = [pyspy, "record", "--pid", str(ours.pid), "--rate", "250", "--format", "raw",
                       "--output", out, "--duration", str(max(1, round(secs))), "--nonblocking"]
                spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                try:
                    time.sleep(0.3)
                    moved = 0
                    t0 = time.perf_counter()
                    while spy.poll() is None:
                        if load == "put":
                            moved += rc.ours_put_pipe(c, 10_000, 1000)
                        elif load == "rt":
                            moved += rc.ours_getdone_rt(c, 500)
                        else:
                            try:
                                moved += rc.ours_get_batch(c, 10_000, 100, 10)
                            except rc.ProtocolError:
                                break  # ran dry
                    dt = time.perf_counter() - t0
                    spy.wait(timeout=secs + 30)
                finally:
                    if spy.poll() is None:
                        spy.kill()
                        spy.wait()
                err = spy.stderr.read().decode(errors="replace") if spy.stderr else ""
                if not os.path.exists(out):
                    self.errors.append(f"profile {load}: py-spy wrote nothing: {err.strip()[-500:]}")
                    continue
                what = {"put": "pipelined PUT 1,000 at a time",
                        "get": "GET COUNT 100 x10 pipelined + multi-id DONE",
                        "rt": "GET + DONE, one round trip each"}[load]
                self.profile[load] = top_functions(out, self.args.profile_top,
                                                   f"{what}: {moved / dt:,.0f} jobs/s under py-spy")
                rc.ours_drain(c)

    # ------------------------------------------------------------- checks
    def check_total_ours(self, c: rc.Conn, where: str, expect: int) -> None:
        try:
            t = rc.ours_total(c, "bench")
        except Exception as exc:
            log(f"   note: TOTAL bench failed ({exc}); queue depth not checked")
            return
        if t[2] != expect or t[3]:
            self.errors.append(f"{where}: expected {expect} waiting and 0 running jobs in "
                               f"'bench', TOTAL says {t}")


# -------------------------------------------------------------------- main

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
        b.section("seed", b.run_seed)
        b.section("profile", b.run_profile)
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
