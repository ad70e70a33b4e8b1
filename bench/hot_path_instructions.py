"""Instructions per queue-server operation, a base commit against the checkout (valgrind).

Wall-clock A/B on a loaded machine swings by 20% from run to run; the instructions the
server's own code executes per request do not. Each load runs in-process (a real
QueueServer and Connection with a data directory, fsync never, a transport that keeps
what it is given) under `valgrind --tool=callgrind` at two sizes; the difference divided
by the extra operations is the cost of one operation, start-up excluded.

    .venv/bin/python bench/hot_path_instructions.py --base 3b7fc9f     # about 5 minutes
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOADS = ("put", "pipe", "getdone", "batch")
LABELS = {"put": "PUT, one request per read", "pipe": "PUT pipelined 1000 per read",
          "getdone": "GET then DONE, one request per read (pipelined preload subtracted)",
          # What a slot does: a batch of 10 per GET ... COUNT and one DONE naming all 10.
          "batch": "per job of GET COUNT 10 then DONE of 10 ids (pipelined preload subtracted)"}

WORKLOAD = '''
import asyncio, sys, tempfile
try:
    from queue_server.server.server import QueueServer, ServerSettings
    from queue_server.server.connection import Connection
except ImportError:  # a base commit from before queue_server/ had subpackages
    from queue_server.server import QueueServer, ServerSettings
    from queue_server.connection import Connection

class Transport:
    def __init__(self): self.out = []
    def write(self, data): self.out.append(data)
    def is_closing(self): return False
    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default
    def pause_reading(self): pass
    def resume_reading(self): pass
    def get_write_buffer_size(self): return 0
    def can_write_eof(self): return True
    def write_eof(self): pass
    def close(self): pass

import re
LOAD, N, NAME = sys.argv[1], int(sys.argv[2]), sys.argv[3]
BLOCK = re.compile(rb"q (\\d+) 0 32\\r\\n")
PUT = b"PUT q 0 32\\r\\n" + b"x" * 32

async def main():
    server = QueueServer(ServerSettings(data_dir=tempfile.mkdtemp() + "/d", fsync="never"))
    server.open()
    server._loop = asyncio.get_running_loop()
    conn = Connection(server)
    transport = Transport()
    conn.connection_made(transport)
    if NAME:  # a slot's connection: CLIENT NAME first (a tree without it answers 400, no harm)
        conn.data_received(b"CLIENT NAME " + NAME.encode() + b"\\r\\n")
    if LOAD == "put":
        for _ in range(N):
            conn.data_received(PUT)
    else:
        for _ in range(N // 1000):
            conn.data_received(PUT * 1000)
    def settle():  # what the housekeeping tick does every 0.5 s (a tree from before it: nothing)
        observed = getattr(server.store, "observed", None)
        if observed:
            for latency in observed:
                latency.settle()
            observed.clear()
    if LOAD == "getdone":
        for i in range(N):
            if i % 1000 == 999:  # the latency buffers' bucketing counts (a server of 2,000 jobs/s)
                settle()
            conn.data_received(b"GET q\\r\\n")
            job_id = transport.out[-1].split(b" ", 4)[3]
            conn.data_received(b"DONE " + job_id + b"\\r\\n")
    if LOAD == "batch":
        for i in range(N // 10):
            if i % 100 == 99:
                settle()
            mark = len(transport.out)
            conn.data_received(b"GET q COUNT 10\\r\\n")
            ids = BLOCK.findall(b"".join(transport.out[mark:]))
            assert len(ids) == 10, ids
            conn.data_received(b"DONE " + b" ".join(ids) + b"\\r\\n")

asyncio.run(main())
'''


def code_at(commit: str | None, root: str) -> str:
    """The tree of `commit` (None: the checkout's queue_server and config) under root."""
    target = os.path.join(root, commit or "checkout", "")
    if commit is None:
        for package in ("queue_server", "config"):
            shutil.copytree(REPO / package, os.path.join(target, package))
        return target
    archive = os.path.join(root, "code.tar")
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", archive, commit, "queue_server",
                    "config"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


def instructions(code: str, script: str, load: str, n: int, name: str) -> int:
    result = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         script, load, str(n), name],
        env=dict(os.environ, PYTHONPATH=code, PYTHONHASHSEED="0"), capture_output=True,
        text=True, check=True, cwd=code,
    )
    match = re.search(r"Collected : (\d+)", result.stderr)
    if match is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{result.stderr[-2000:]}")
    return int(match.group(1))


def per_op(code: str, script: str, load: str, small: int, large: int, name: str) -> float:
    return ((instructions(code, script, load, large, name) - instructions(code, script, load, small, name))
            / (large - small))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--new", help="a commit instead of the checkout as it is")
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=8000)
    parser.add_argument("--name", default="", help="CLIENT NAME the connection gives first (a slot's: "
                        "slot.<host>.<id>); default none, as a plain sockPQd client")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="slotmap-ir-") as root:
        script = os.path.join(root, "workload.py")
        Path(script).write_text(WORKLOAD)
        codes = {"base": code_at(args.base, root), "new": code_at(args.new, root)}
        cost = {(name, load): per_op(code, script, load, args.small, args.large, args.name)
                for name, code in codes.items() for load in LOADS}
    for name in codes:  # GET+DONE and the batches ran after a pipelined preload of as many jobs
        cost[name, "getdone"] -= cost[name, "pipe"]
        cost[name, "batch"] -= cost[name, "pipe"]
    named = f", connection named {args.name}" if args.name else ""
    print(f"instructions per operation (callgrind), base {args.base} vs {args.new or 'checkout'}{named}")
    print("| load | base | new | new/base |\n| --- | ---: | ---: | ---: |")
    for load in LOADS:
        base, new = cost["base", load], cost["new", load]
        print(f"| {LABELS[load]} | {base:,.0f} | {new:,.0f} | {new / base:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
