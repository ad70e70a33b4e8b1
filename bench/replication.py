"""Replication benchmark (issue 17): PUT throughput and acknowledgement latency with no
replica, an async replica and a sync replica, fsync always and never, 1 and 16
producers, in one run.

Real `slotmap queue-server` processes on loopback (the replica beside the primary, both
with the same fsync policy); the producers are one Python process with N sockets on
epoll, one PUT of 64 bytes in flight each (bench/rawclient.py's way), for --seconds per
figure. Configurations are interleaved rep by rep so that other load on the machine falls
on all alike; figures are medians over --reps.

    .venv/bin/python bench/replication.py                 # ~3 minutes
    .venv/bin/python bench/replication.py --reps 1 --seconds 2

With --failovers N, the failover time instead (issue 17: under 3 s with default settings):
three servers in sync mode (fsync always) under a real manager on SQLite with the default
lease_s and promote_after_s, 4 producers through QueueClient with their own keys; the
primary killed -9 N times, each time restarted to come back as a replica
(tests/queue_server/server/ha_cluster.py, as the ten-failover test); the seconds from
each kill to the first write acknowledged after it, and their p50 and max.

    .venv/bin/python bench/replication.py --failovers 10  # ~1 minute
"""
from __future__ import annotations

import argparse
import contextlib
import selectors
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # procs, polling: as tests/conftest.py does

from tests.queue_server.server_proc import ServerProc, start_queue_server  # noqa: E402

PAYLOAD = b"x" * 64
REQUEST = b"PUT bench 0 %d\r\n%s" % (len(PAYLOAD), PAYLOAD)
MODES = ("none", "async", "sync")


@contextlib.contextmanager
def servers(root: Path, mode: str, fsync: str) -> Iterator[ServerProc]:
    started: list[ServerProc] = []
    try:
        extra = ("--replicate", "sync") if mode == "sync" else ()
        primary = start_queue_server(root, "--fsync", fsync, *extra)
        started.append(primary)
        if mode != "none":
            started.append(start_queue_server(root, "--fsync", fsync, *extra, "--replica-of",
                                              primary.address, "--server-id", "2"))
            wait_linked(primary)
        yield primary
    finally:
        for server in started:
            server.kill()


def wait_linked(primary: ServerProc, deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with socket.create_connection((primary.host, primary.port), timeout=5) as sock:
            sock.sendall(b"ROLE\r\n")
            words = sock.makefile("rb").readline().split()
            if len(words) >= 5 and words[4] == b"1":
                return
        time.sleep(0.05)
    raise RuntimeError("the replica did not link")


def run_load(host: str, port: int, producers: int, seconds: float,
             token: str | None = None) -> tuple[float, list[float]]:
    """(acknowledged PUT/s, latencies in seconds) with `producers` sockets, one PUT each in
    flight; each signed in with `token` first when one is given."""
    sel = selectors.DefaultSelector()
    socks = [socket.create_connection((host, port)) for _ in range(producers)]
    for sock in socks if token is not None else ():
        sock.sendall(b"AUTH %s\r\n" % token.encode())
        reply = sock.makefile("rb").readline()
        if not reply.startswith(b"200"):
            raise RuntimeError(f"AUTH refused: {reply!r}")
    latencies: list[float] = []
    sent_at = [0.0] * producers
    partial = [b""] * producers
    try:
        start = time.perf_counter()
        end = start + seconds
        for i, sock in enumerate(socks):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sel.register(sock, selectors.EVENT_READ, i)
            sent_at[i] = time.perf_counter()
            sock.sendall(REQUEST)
        done = 0
        active = producers
        while active:
            for key, _ in sel.select(timeout=30):
                i = key.data
                data = partial[i] + socks[i].recv(65536)
                if not data:
                    raise ConnectionError("closed")
                if b"\n" not in data:
                    partial[i] = data
                    continue
                line, _, partial[i] = data.partition(b"\n")
                if not line.startswith(b"200"):
                    raise RuntimeError(f"refused: {line!r}")
                now = time.perf_counter()
                latencies.append(now - sent_at[i])
                done += 1
                if now >= end:
                    sel.unregister(socks[i])
                    active -= 1
                else:
                    sent_at[i] = now
                    socks[i].sendall(REQUEST)
        return done / (time.perf_counter() - start), latencies
    finally:
        sel.close()
        for sock in socks:
            sock.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def failovers(count: int) -> list[float]:
    """Seconds from each kill of the primary to the first write acknowledged after it."""
    from tests.conftest import QueueServer
    from tests.queue_server.server.ha import KeyedProducer
    from tests.queue_server.server.ha_cluster import fail_over_once, managed_cluster

    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        root = Path(tmp)
        started: list[QueueServer] = []

        def start(*args: str, data_dir: Path | None = None, port: int | None = None) -> QueueServer:
            server = QueueServer.of(start_queue_server(root, *args, data_dir=data_dir, port=port))
            started.append(server)
            return server

        try:
            with managed_cluster(root, f"sqlite:///{root / 'slotmap.db'}", start) as ha:
                producers = [KeyedProducer(f"k{n}", ha.addresses).start() for n in range(4)]
                seconds: list[float] = []
                try:
                    primary = ha.servers[0]
                    for epoch in range(2, count + 2):
                        primary, took = fail_over_once(ha, producers, primary, epoch)
                        seconds.append(took)
                        print(f"failover {epoch - 1}: {took:.2f} s", flush=True)
                finally:
                    for producer in producers:
                        producer.finish()
        finally:
            for server in started:
                server.kill()
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--failovers", type=int, default=0, metavar="N",
                    help="measure N failovers instead (kill -9 of the primary to the first ack)")
    args = ap.parse_args()
    if args.failovers:
        took = sorted(failovers(args.failovers))
        print(f"failover to the first acknowledged write over {len(took)} failovers: "
              f"p50 {took[len(took) // 2]:.2f} s, max {took[-1]:.2f} s")  # the test's p50
        return 0
    results: dict[tuple[str, str, int], list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-repl-") as tmp:
        root = Path(tmp)
        for _ in range(args.reps):
            for fsync in ("always", "never"):
                for producers in (1, 16):
                    for mode in MODES:
                        with servers(root, mode, fsync) as primary:
                            rate, lat = run_load(primary.host, primary.port, producers, args.seconds)
                        results.setdefault((fsync, mode, producers), []).append(
                            (rate, percentile(lat, 0.5), percentile(lat, 0.99)))
    print("| fsync | producers | replica | PUT/s | vs async | p50 ms | p99 ms | p99 vs async |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for fsync in ("always", "never"):
        for producers in (1, 16):
            base = results[(fsync, "async", producers)]
            base_rate = statistics.median(r for r, _, _ in base)
            base_p99 = statistics.median(p for _, _, p in base)
            for mode in MODES:
                runs = results[(fsync, mode, producers)]
                rate = statistics.median(r for r, _, _ in runs)
                p50 = statistics.median(p for _, p, _ in runs)
                p99 = statistics.median(p for _, _, p in runs)
                print(f"| {fsync} | {producers} | {mode} | {rate:,.0f} | {rate / base_rate:.2f} | "
                      f"{p50 * 1000:.2f} | {p99 * 1000:.2f} | {p99 / base_p99:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
