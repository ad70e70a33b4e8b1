"""Finished jobs kept (issue 26 point 2): memory per kept job and `JOB <key>` among a million.

1. Memory, in a child process of its own (RSS from /proc, the allocator's reuse included):
   N jobs of 32-byte data put, handed out and finished with a 16-byte result, kept
   (keep_done_max = keep_done_total_max = N); RSS after, less RSS with the store empty, per job.
   The same with keeping off (keep_done_total_max = 0) shows what finishing costs without it.
2. Lookup, on a real `slotmap queue-server` holding a million finished jobs: `JOB <key>` of
   random kept keys over one connection, one at a time; the round trip p50 / p99 / max (the
   server's work is under it), and the server-side work alone (job_view + JSON) in-process.

    .venv/bin/python bench/kept_jobs.py [--jobs 1000000]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# The repo first: bench/queue_server.py would shadow the package (this folder is sys.path[0]).
sys.path.insert(0, str(REPO))
from rawclient import Conn  # noqa: E402

DATA = b"x" * 32
RESULT = b'{"ok":true,"n":1}'[:16]
BATCH = 1000


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_child(jobs: int, keep: bool) -> None:
    """Run in a child: print {"per_job": bytes} for `jobs` finished jobs, kept or not."""
    from queue_server.protocol.retry import QueuePolicy
    from queue_server.server.store import Store

    store = Store(policies={"q": QueuePolicy(keep_done_max=jobs)}, keep_done_total=jobs if keep else 0)
    gc.collect()
    before = _rss()
    for start in range(0, jobs, BATCH):
        for _ in range(min(BATCH, jobs - start)):
            store.put("q", 0, bytes(DATA), None, time.time())
        taken = store.take(("q",), BATCH, time.time(), None, None, True)
        for job in taken:
            store.done((job.id,), "slot.bench.0", bytes(RESULT))
        store.drain_changes()
    gc.collect()
    after = _rss()
    print(json.dumps({"per_job": (after - before) / jobs, "kept": len(store.kept)}))


def memory(jobs: int) -> dict[str, float]:
    figures = {}
    for keep in (True, False):
        out = subprocess.run([sys.executable, __file__, "--child", str(jobs), "--keep" if keep else "--no-keep"],
                             capture_output=True, text=True, check=True, cwd=REPO)
        figures["kept" if keep else "not kept"] = json.loads(out.stdout)["per_job"]
    return figures


def server_side_lookup(jobs: int, samples: int) -> dict[str, float]:
    """job_view + JSON for random keys among `jobs` kept, in-process (the server's work)."""
    from queue_server.protocol.retry import QueuePolicy
    from queue_server.server import job_views
    from queue_server.server.store import Store

    store = Store(policies={"q": QueuePolicy(keep_done_max=jobs)}, keep_done_total=jobs)
    for start in range(0, jobs, BATCH):
        for _ in range(min(BATCH, jobs - start)):
            store.put("q", 0, DATA, None, time.time())
        for job in store.take(("q",), BATCH, time.time(), None, None, True):
            store.done((job.id,), "slot.bench.0", RESULT)
        store.drain_changes()
    keys = random.sample(list(store.kept), samples)
    times = []
    for key in keys:
        started = time.perf_counter()
        job_views.json_block(job_views.job_view(store, key, with_errors=True))  # type: ignore[arg-type]
        times.append(time.perf_counter() - started)
    times.sort()
    return {"p50_us": times[len(times) // 2] * 1e6, "max_us": times[-1] * 1e6}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def real_server_lookup(jobs: int, samples: int) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="kept-bench-"))
    config = work / "server.toml"
    config.write_text(f"[queue_server]\nkeep_done_total_max = {jobs}\n[queues.q]\nkeep_done_max = {jobs}\n")
    port = _free_port()
    server = subprocess.Popen([str(REPO / ".venv/bin/slotmap"), "queue-server", "--listen", f"127.0.0.1:{port}",
                               "--data-dir", str(work / "data"), "--fsync", "never", "--config", str(config)],
                              stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = Conn("127.0.0.1", port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        filled = time.monotonic()
        for start in range(0, jobs, BATCH):
            count = min(BATCH, jobs - start)
            conn.send(b"".join(b"PUT q 0 32 KEY k%d\r\n" % (start + n) + DATA for n in range(count)))
            conn.readlines(count)
            conn.send(b"GET q COUNT %d\r\n" % count)
            assert conn.readline() == b"200 OK %d JOBS" % count
            ids = []
            for _ in range(count):
                head = conn.readline().split()
                ids.append(head[1])  # `<q> <id> <prio> <len>` in a batch
                conn.readexact(int(head[3]))
            conn.send(b"".join(b"DONE %s RESULT 16\r\n" % job_id + RESULT for job_id in ids))
            conn.readlines(count)
        filled = time.monotonic() - filled
        times = []
        for key in random.sample(range(jobs), samples):
            started = time.perf_counter()
            conn.send(b"JOB k%d\r\n" % key)
            head = conn.readline()
            body = json.loads(conn.readexact(int(head.split()[2])))
            times.append(time.perf_counter() - started)
            assert body["state"] == "done" and body["result"] == RESULT.decode(), body
        times.sort()
        conn.send(b"STATS q\r\n")
        stats = json.loads(conn.readexact(int(conn.readline().split()[2])))["q"]
        with open(f"/proc/{server.pid}/statm") as statm:
            rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        return {"fill_s": filled, "kept": stats["kept"], "rss_mb": rss / 2**20,
                "p50_ms": times[len(times) // 2] * 1e3, "p99_ms": times[int(len(times) * 0.99)] * 1e3,
                "max_ms": times[-1] * 1e3}
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--keep", action=argparse.BooleanOptionalAction, default=True, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        memory_child(args.child, args.keep)
        return 0
    per_job = memory(args.jobs)
    print(f"memory per finished job, {args.jobs:,} jobs of 32-byte data and a 16-byte result: "
          f"kept {per_job['kept']:.0f} B, not kept {per_job['not kept']:.0f} B "
          f"(keeping costs {per_job['kept'] - per_job['not kept']:.0f} B per job)")
    inside = server_side_lookup(args.jobs, args.samples)
    print(f"JOB <key> among {args.jobs:,} kept, the server's work in-process: p50 {inside['p50_us']:.1f} us, "
          f"max {inside['max_us']:.1f} us")
    real = real_server_lookup(args.jobs, args.samples)
    print(f"real server holding {real['kept']:,} kept (filled in {real['fill_s']:.0f} s, RSS {real['rss_mb']:.0f} MB): "
          f"JOB <key> round trip p50 {real['p50_ms']:.3f} ms, p99 {real['p99_ms']:.3f} ms, max {real['max_ms']:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
