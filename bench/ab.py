"""A/B of the queue server: the code of a base commit against the checkout, in one run.

Both servers run side by side from frozen copies (the base from `git archive`, the
checkout copied at the start) and every rep goes round both, so a ratio compares runs
made seconds apart on the same machine. Prints per-rate medians and new/base ratios,
and the memory each server takes per queued job.

    .venv/bin/python bench/ab.py --base 3b7fc9f            # about 3 minutes
    .venv/bin/python bench/ab.py --base HEAD~5 --jobs 5000 --reps 3 --depth 200000
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers
import rawclient as rc

REPO = Path(__file__).resolve().parent.parent


def frozen_copy(commit: str | None) -> str:
    """The server's packages at `commit` (None: the checkout as it is) in a temp dir."""
    root = tempfile.mkdtemp(prefix="slotmap-ab-")
    src = os.path.join(root, "src")
    if commit is None:
        shutil.copytree(REPO, src, ignore=peers._SNAPSHOT_IGNORE)
        return src
    archive = os.path.join(root, "code.tar")
    subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", archive, commit],
                   check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    return src


def start(code: str, fsync: str, name: str) -> peers.ManagedServer:
    workdir = peers.make_tmpdir(f"ab-{name}")
    data_dir = os.path.join(workdir, "data")
    os.makedirs(data_dir)
    port = peers.free_port()
    py = REPO / ".venv" / "bin" / "python"
    cmd = [str(py) if py.exists() else sys.executable, "-m", "deploy.cli", "queue-server",
           "--listen", f"127.0.0.1:{port}", "--data-dir", data_dir, "--fsync", fsync]
    env = dict(os.environ, PYTHONPATH=code)
    return peers.ManagedServer(name, cmd, port, workdir, cwd=code, env=env).start(timeout=60)


def rss_kb(server: peers.ManagedServer) -> int:
    return peers.memory_kb(server.pid)["VmRSS"]


def measure(samples: dict[str, list[float]], key: str, fn: Callable[[], int]) -> None:
    started = time.perf_counter()
    n = fn()
    samples[key].append(n / (time.perf_counter() - started))


def in_memory_rates(conn: rc.Conn, n: int, samples: dict[str, list[float]], tag: str) -> None:
    measure(samples, f"PUT round trip|{tag}", lambda: rc.ours_put_rt(conn, n))
    measure(samples, f"GET+DONE round trip|{tag}", lambda: rc.ours_getdone_rt(conn, n))
    measure(samples, f"PUT pipelined 1000|{tag}", lambda: rc.ours_put_pipe(conn, n, 1000))
    measure(samples, f"GET COUNT 100 x10 + DONE|{tag}", lambda: rc.ours_get_batch(conn, n, 100, 10))


def durable_rates(server: peers.ManagedServer, n: int, clients: int,
                  samples: dict[str, list[float]], tag: str) -> None:
    done, seconds = rc.concurrent_put(server.host, server.port, n, clients,
                                      rc.ours_put_request("bench"), ok_prefix=b"200")
    samples[f"fsync always, {clients} connections, PUT|{tag}"].append(done / seconds)
    conn = rc.Conn(server.host, server.port)
    try:
        rc.ours_drain(conn)
    finally:
        conn.close()


def per_job_bytes(code: str, depth: int, name: str) -> float:
    server = start(code, "never", name)
    try:
        conn = rc.Conn(server.host, server.port)
        rc.ours_put_rt(conn, 100)
        rc.ours_drain(conn)
        before = rss_kb(server)
        rc.ours_put_pipe(conn, depth, 1000)
        after = rss_kb(server)
        conn.close()
        return (after - before) * 1024 / depth
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--depth", type=int, default=1_000_000, help="jobs for the memory row (0: skip)")
    args = parser.parse_args(argv)
    peers.install_cleanup()
    codes = {"base": frozen_copy(args.base), "new": frozen_copy(None)}
    samples: dict[str, list[float]] = defaultdict(list)
    servers = {tag: start(code, "never", f"{tag}-never") for tag, code in codes.items()}
    durable = {tag: start(code, "always", f"{tag}-always") for tag, code in codes.items()}
    conns = {tag: rc.Conn(s.host, s.port) for tag, s in servers.items()}
    try:
        for conn in conns.values():
            rc.ours_put_rt(conn, 1000)
            rc.ours_getdone_rt(conn, 1000)
        for rep in range(args.reps):
            order = ("base", "new") if rep % 2 == 0 else ("new", "base")
            print(f"rep {rep + 1}/{args.reps}", file=sys.stderr)
            for tag in order:
                in_memory_rates(conns[tag], args.jobs, samples, tag)
                durable_rates(durable[tag], args.jobs, args.clients, samples, tag)
    finally:
        for conn in conns.values():
            conn.close()
        for server in (*servers.values(), *durable.values()):
            server.stop()
    rows = list(dict.fromkeys(key.split("|")[0] for key in samples))
    print(f"A/B: base {args.base} vs checkout, {args.jobs:,} jobs per run, median of {args.reps}")
    print("| rate | base | new | new/base |")
    print("| --- | ---: | ---: | ---: |")
    for row in rows:
        base = statistics.median(samples[f"{row}|base"])
        new = statistics.median(samples[f"{row}|new"])
        print(f"| {row} | {base:,.0f}/s | {new:,.0f}/s | {new / base:.3f} |")
    if args.depth:
        sizes = {tag: per_job_bytes(code, args.depth, f"{tag}-mem") for tag, code in codes.items()}
        print(f"| memory per queued 32-byte job ({args.depth:,} jobs) | {sizes['base']:.0f} B "
              f"| {sizes['new']:.0f} B | {sizes['new'] / sizes['base']:.3f} |")
    for code in codes.values():
        shutil.rmtree(os.path.dirname(code), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
