"""Sync mode's PUT throughput and p99 against a base commit in one run (issue 25): what lease
ids in eras and the role check (a producer's token, the cluster credential on the replication
link) cost a secured cluster, and what they cost one without tokens.

A primary and one replica in sync mode, real `slotmap queue-server` processes of each tree
on loopback (the base from `git archive`); producers as bench/replication.py's (N sockets on
epoll, one 64-byte PUT in flight each), after `AUTH` where a token is set. Configurations
interleaved rep by rep so that other load falls on all alike; medians over --reps.

    .venv/bin/python bench/sync_ab.py --base 29606e0 --reps 3 --seconds 2
"""
from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from base_checkout import _free_port, code_dirs  # noqa: E402
from replication import percentile, run_load  # noqa: E402

START_DEADLINE_S = 30.0


def _write_secret(path: Path, text: str) -> str:
    path.write_text(text + "\n")
    path.chmod(0o600)  # the server refuses a token file others can read
    return str(path)


def config_text(work: Path, tokens: str, fsync: str) -> tuple[str, str | None]:
    """(the servers' TOML, the producers' token): `none`, `one` (token_file only: the base's
    way), `roles` (admin, producer and cluster tokens: a secured cluster's way)."""
    lines = ["[queue_server]", 'replicate = "sync"', f'fsync = "{fsync}"']
    producer = None
    if tokens in ("one", "roles"):
        admin = secrets.token_hex(16)
        lines.append(f'token_file = "{_write_secret(work / "admin.token", admin)}"')
        producer = admin
    if tokens == "roles":
        producer = secrets.token_hex(16)
        lines.append(f'producer_token_file = "{_write_secret(work / "producer.token", producer)}"')
        cluster = secrets.token_hex(16)
        lines.append(f'cluster_token_file = "{_write_secret(work / "cluster.token", cluster)}"')
    return "\n".join(lines) + "\n", producer


def _start(code_dir: Path, work: Path, name: str, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    command = [sys.executable, "-m", "deploy.cli", "queue-server", "--listen", f"127.0.0.1:{port}",
               "--data-dir", str(work / name), "--config", str(work / "server.toml"), *extra]
    process = subprocess.Popen(command, cwd=code_dir, env=dict(os.environ, PYTHONPATH=str(code_dir)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{name} of {code_dir} did not start")


def _linked(port: int, token: str | None) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        reader = sock.makefile("rb")
        if token is not None:
            sock.sendall(b"AUTH %s\r\n" % token.encode())
            reader.readline()
        sock.sendall(b"ROLE\r\n")
        words = reader.readline().split()
    return len(words) >= 5 and words[4] == b"1"


@contextlib.contextmanager
def pair(code_dir: Path, tokens: str, fsync: str) -> Iterator[tuple[int, str | None]]:
    """A sync primary and its replica of `code_dir`: (the primary's port, the producers' token)."""
    with tempfile.TemporaryDirectory(prefix="bench-sync-ab-") as tmp:
        work = Path(tmp)
        text, producer = config_text(work, tokens, fsync)
        (work / "server.toml").write_text(text)
        (work / "server.toml").chmod(0o600)
        started = []
        try:
            primary, port = _start(code_dir, work, "primary")
            started.append(primary)
            replica, _ = _start(code_dir, work, "replica", "--replica-of", f"127.0.0.1:{port}",
                                "--server-id", "2")
            started.append(replica)
            deadline = time.monotonic() + START_DEADLINE_S
            while not _linked(port, producer):
                if time.monotonic() > deadline:
                    raise RuntimeError("the replica did not link")
                time.sleep(0.05)
            yield port, producer
        finally:
            for process in started:
                process.kill()
                process.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    # (tree, tokens): the base with its one token and without; the checkout secured by role
    # and without tokens.
    with code_dirs(args.base, prefix="bench-sync-ab-base-") as dirs:
        base_name = next(name for name in dirs if name != "new")
        setups = [(base_name, "none"), ("new", "none"), (base_name, "one"), ("new", "roles")]
        results: dict[tuple[str, str, str, int], list[tuple[float, float, float]]] = {}
        for _ in range(args.reps):
            for fsync in ("never", "always"):
                for producers in (1, 16):
                    for tree, tokens in setups:
                        with pair(dirs[tree], tokens, fsync) as (port, token):
                            rate, lat = run_load("127.0.0.1", port, producers, args.seconds, token)
                        results.setdefault((tree, tokens, fsync, producers), []).append(
                            (rate, percentile(lat, 0.5), percentile(lat, 0.99)))
    print("| fsync | producers | tree, tokens | PUT/s | p50 ms | p99 ms | PUT/s new/base | p99 new/base | reps PUT/s |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for fsync in ("never", "always"):
        for producers in (1, 16):
            for tree, tokens in setups:
                runs = results[(tree, tokens, fsync, producers)]
                rate = statistics.median(r for r, _, _ in runs)
                p50 = statistics.median(p for _, p, _ in runs)
                p99 = statistics.median(p for _, _, p in runs)
                ratio = p99_ratio = ""
                if tree == "new":
                    base_tokens = "none" if tokens == "none" else "one"
                    base = results[(base_name, base_tokens, fsync, producers)]
                    ratio = f"{rate / statistics.median(r for r, _, _ in base):.3f}"
                    p99_ratio = f"{p99 / statistics.median(p for _, _, p in base):.3f}"
                spread = ", ".join(f"{r:,.0f}" for r, _, _ in runs)
                print(f"| {fsync} | {producers} | {tree}, {tokens} | {rate:,.0f} | {p50 * 1000:.2f} | "
                      f"{p99 * 1000:.2f} | {ratio} | {p99_ratio} | {spread} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
