"""Many queues: PING's latency while STATS is asked, with --queues queues of one job each.

A real `slotmap queue-server` (fsync never) is filled with one job in each of --queues
queues; then one client asks STATS --stats times back to back while another sends PING
after PING, each waiting for its answer. Reported: STATS's size and time, PING's p50, p99
and worst, STATS TOP 20's time, and the server's RSS. With --base <commit> the same runs
against that commit's code (git archive to a temporary folder), for the A/B.

    .venv/bin/python bench/many_queues.py --queues 50000 --base f5016ee
"""
from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from base_checkout import code_dirs, rss_bytes, start_queue_server

ASKER = """
import socket, sys, time
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=120)
reader = sock.makefile("rb")
times = []
for _ in range(int(sys.argv[2])):
    started = time.perf_counter()
    sock.sendall(b"STATS\\r\\n")
    size = int(reader.readline().split()[2])
    reader.read(size)
    times.append(time.perf_counter() - started)
print(size, *times)
"""


def _read_sized(reader: object) -> bytes:
    head = reader.readline()  # type: ignore[attr-defined]
    return reader.read(int(head.split()[2]))  # type: ignore[attr-defined,no-any-return]


def run(code_dir: Path, queues: int, asks: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as work:
        process, port = start_queue_server(code_dir, Path(work))
        try:
            filler = socket.create_connection(("127.0.0.1", port))
            filler.sendall(b"".join(b"PUT m%d 0 1\r\nx" % index for index in range(queues)))
            got = b""
            while got.count(b"\n") < queues:
                got += filler.recv(1 << 20)
            filler.close()
            # The asker is another process: in this one it would hold the GIL while it
            # reads 12 MB, and PING's time would be the client's, not the server's.
            asker = subprocess.Popen([sys.executable, "-c", ASKER, str(port), str(asks)],
                                     stdout=subprocess.PIPE)
            pinger = socket.create_connection(("127.0.0.1", port), timeout=120)
            pinger.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ping_reader = pinger.makefile("rb")
            pings: list[float] = []
            while asker.poll() is None:
                started = time.perf_counter()
                pinger.sendall(b"PING\r\n")
                ping_reader.readline()
                pings.append(time.perf_counter() - started)
            out = asker.communicate()[0].split()
            sizes, times = [int(out[0])], sorted(float(value) for value in out[1:])
            asker = socket.create_connection(("127.0.0.1", port), timeout=120)
            asker_reader = asker.makefile("rb")
            started = time.perf_counter()
            asker.sendall(b"STATS TOP 20\r\n")
            head = asker_reader.readline()
            top_s = time.perf_counter() - started
            if head.startswith(b"200"):
                asker_reader.read(int(head.split()[2]))
            pings.sort()
            return {
                "stats_mb": sizes[0] / 1e6, "stats_s": sorted(times)[len(times) // 2],
                "pings": len(pings), "ping_p50_ms": pings[len(pings) // 2] * 1000,
                "ping_p99_ms": pings[min(len(pings) - 1, int(len(pings) * 0.99))] * 1000,
                "ping_max_ms": pings[-1] * 1000, "top20_s": top_s if head.startswith(b"200") else -1,
                "rss_mib": rss_bytes(process.pid) / 2**20,
            }
        finally:
            process.kill()
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queues", type=int, default=50_000)
    parser.add_argument("--stats", type=int, default=5, help="STATS asked back to back")
    parser.add_argument("--base", help="a commit to compare with")
    args = parser.parse_args()
    with code_dirs(args.base, prefix="many-queues-base-") as runs:
        for label, code_dir in runs.items():
            figures = run(code_dir, args.queues, args.stats)
            print(f"{label}: " + ", ".join(f"{key} {value:.3g}" for key, value in figures.items()))


if __name__ == "__main__":
    main()
