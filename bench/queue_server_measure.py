"""The measuring of bench/queue_server.py: the Bench (samples, medians, per-rep ratios),
the servers it starts, the request sequences and the interleaved in-memory and fsync
sections. The seed test and the profile are in queue_server_profile.py, the tables and
RESULTS.md in queue_server_report.py."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import peers
import rawclient as rc
import seed_test


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
