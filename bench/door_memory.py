"""The queue server's memory under hostile connections (issue 16, points 8 and 9).

A real `slotmap queue-server` with a token; --connections sockets each send
`PUT q 0 1048576` and 1,000,000 bytes of its block, then hold: once without AUTH, once
after the right AUTH (every client is "authenticated" on a server without a token). Then
as many idle connections that only PING. Reported: the server's RSS growth for each, from
/proc. With --base <commit> the same against that commit (git archive), for the A/B; the
base is started without the new settings it does not know.

    .venv/bin/python bench/door_memory.py --connections 300 --base f5016ee
"""
from __future__ import annotations

import argparse
import socket
import tempfile
import time
from pathlib import Path

from base_checkout import code_dirs, rss_bytes, start_queue_server

REPO = Path(__file__).resolve().parent.parent
TOKEN = "bench_T0ken"
HELD = 1_000_000


def _settled(pid: int) -> int:
    last = rss_bytes(pid)
    for _ in range(60):
        time.sleep(0.5)
        now = rss_bytes(pid)
        if abs(now - last) < 1 << 20:
            return now
        last = now
    return last


def _attack(port: int, count: int, prefix: bytes, payload: bytes) -> list[socket.socket]:
    opened = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        opened.append(sock)
        try:
            sock.sendall(prefix + payload)
        except OSError:
            pass
    return opened


def run(code_dir: Path, connections: int) -> dict[str, float]:
    figures = {}
    payload = b"PUT q 0 1048576\r\n" + b"x" * HELD
    cases = {"unauthenticated": b"", "authenticated": f"AUTH {TOKEN}\r\n".encode(),
             "idle PING": f"AUTH {TOKEN}\r\nPING\r\n".encode()}
    for label, prefix in cases.items():
        with tempfile.TemporaryDirectory() as work:
            config = f'[queue_server]\ntoken = "{TOKEN}"\nmax_clients = {connections * 2}\n'
            process, port = start_queue_server(code_dir, Path(work), config=config)
            try:
                before = _settled(process.pid)
                opened = _attack(port, connections, prefix, b"" if label == "idle PING" else payload)
                figures[f"{label} MiB"] = (_settled(process.pid) - before) / 2**20
                for sock in opened:
                    sock.close()
            finally:
                process.kill()
                process.wait()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--base", help="a commit to compare with")
    args = parser.parse_args()
    with code_dirs(args.base, prefix="door-memory-base-") as runs:
        for label, code_dir in runs.items():
            figures = run(code_dir, args.connections)
            print(f"{label}, {args.connections} connections, RSS growth: "
                  + ", ".join(f"{key} {value:.1f}" for key, value in figures.items()))


if __name__ == "__main__":
    main()
