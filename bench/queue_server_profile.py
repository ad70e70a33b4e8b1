"""The seed test (the sockPQd manual's own, bench/seed_test.py) and the py-spy profile
sections of bench/queue_server.py, run on its Bench (queue_server_measure.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import peers
import rawclient as rc
import seed_test
from queue_server_measure import Bench, log
from queue_server_report import top_functions


def run_seed(b: Bench) -> None:
    rounds, per_round = seed_test.VARIANTS["linked"]
    if b.args.quick:
        rounds, per_round = 3, 2_000
    ours = b.start_ours(b.args.seed_fsync)
    if ours:
        log(f"   seed test on ours ({rounds} x {per_round:,})")
        b.seed["ours"] = seed_test.run_ours(ours.host, ours.port, rounds, per_round,
                                            progress=b.args.verbose)
        ours.stop()
    if b.bs_path:
        bs = b.start_bs()
        assert bs is not None
        log(f"   seed test on beanstalkd ({rounds} x {per_round:,})")
        b.seed["bs"] = seed_test.run_beanstalkd(bs.host, bs.port, rounds, per_round,
                                                progress=b.args.verbose)
        bs.stop()


def run_profile(b: Bench) -> None:
    pyspy = shutil.which("py-spy") or str(peers.REPO / ".venv" / "bin" / "py-spy")
    if not os.access(pyspy, os.X_OK):
        b.notes.append("profile skipped: py-spy not found (.venv/bin/pip install py-spy)")
        return
    ours = b.start_ours("never")
    if not ours:
        return
    secs = b.args.profile_seconds
    for load in ("put", "get", "rt"):
        out = os.path.join(ours.workdir, f"profile-{load}.txt")
        with rc.Conn(ours.host, ours.port) as c:
            b.warm_ours(c)
            if load != "put":
                pre = b.args.profile_get_jobs if load == "get" else 100_000
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
                b.errors.append(f"profile {load}: py-spy wrote nothing: {err.strip()[-500:]}")
                continue
            what = {"put": "pipelined PUT 1,000 at a time",
                    "get": "GET COUNT 100 x10 pipelined + multi-id DONE",
                    "rt": "GET + DONE, one round trip each"}[load]
            b.profile[load] = top_functions(out, b.args.profile_top,
                                            f"{what}: {moved / dt:,.0f} jobs/s under py-spy")
            rc.ours_drain(c)
