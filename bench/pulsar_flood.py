"""The pulsar under one peer's unread flood, this tree against a base commit in one run (issue 25.8).

For each tree: a real pulsar (`python -m slot.pulsar.cli` run from that tree, 10 permits/s),
a real peer sending acquires as fast as it can (reserving 1 s ahead, the most allowed) and
reading none, and a real client of this tree taking permits one after another. Printed per
tree: the client's first permit, its permits per second (its fair share is 5/s, half of 10),
the latency of a state request by a third peer, the pulsar's memory growth, and the flood's
rate; then the same two clients with no flood (the rate two honest peers share).

    .venv/bin/python bench/pulsar_flood.py --base 29606e0
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(REPO_ROOT))

import psutil  # noqa: E402

from slot.pulsar.client import PermitClient  # noqa: E402
from slot.pulsar.errors import PermitError  # noqa: E402

RATE_PER_S = 10
START_DEADLINE_S = 30.0
FLOOD_SCRIPT = """
import sys, time, zmq
from slot.pulsar.protocol import AcquireRequest
socket = zmq.Context().socket(zmq.DEALER)
socket.setsockopt(zmq.LINGER, 0)
socket.connect(sys.argv[1])
frame = AcquireRequest(id=1, limiter="api", retry=True, reserve_s=1.0).encode()
started, sent, told = time.monotonic(), 0, 0.0
print("flooding", flush=True)
while True:
    socket.send(frame)  # blocks once the pulsar's intake for this peer is full
    sent += 1
    if sent % 256 == 0 and time.monotonic() - told >= 0.5:
        told = time.monotonic()
        print(f"{sent / (told - started):.0f}", flush=True)
"""


@dataclass(frozen=True, slots=True)
class Figures:
    first_permit_s: float
    permits_per_s: float
    state_p50_ms: float
    state_max_ms: float
    rss_growth_mb: float
    flood_per_s: float
    two_clients_per_s: float

    def line(self, label: str) -> str:
        return (f"{label:<12} first permit {self.first_permit_s:6.3f} s, {self.permits_per_s:5.2f} permits/s "
                f"under the flood, state p50 {self.state_p50_ms:5.1f} ms max {self.state_max_ms:6.1f} ms, "
                f"RSS {self.rss_growth_mb:+5.1f} MB, flood {self.flood_per_s:,.0f} req/s; "
                f"no flood, two clients: {self.two_clients_per_s:5.2f}/s")


def free_endpoint() -> str:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


@contextlib.contextmanager
def process(args: list[str], cwd: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(START_DEADLINE_S)


@contextlib.contextmanager
def pulsar(tree: Path, workdir: Path) -> Iterator[tuple[str, psutil.Process]]:
    config = workdir / "cluster.toml"
    config.write_text(f"[queues.api]\nrate_limit = {{ permits = {RATE_PER_S}, period_s = 1.0, margin = 0 }}\n")
    endpoint = free_endpoint()
    with process(["-m", "slot.pulsar.cli", "--config", str(config), "--listen", endpoint], tree) as proc:
        with PermitClient(endpoint, reply_timeout_s=0.5) as ready:
            deadline = time.monotonic() + START_DEADLINE_S
            while True:
                with contextlib.suppress(PermitError):
                    ready.states()
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"the pulsar of {tree} did not answer")
        yield endpoint, psutil.Process(proc.pid)


def take_for(endpoint: str, seconds: float) -> tuple[float, float]:
    """(first permit's wait, permits per second after it) of one client taking in a loop."""
    with PermitClient(endpoint) as client:
        asked_at = time.monotonic()
        client.take("api", 1, wait_s=seconds)
        first_s = time.monotonic() - asked_at
        started, granted = time.monotonic(), 0
        while (left := started + seconds - time.monotonic()) > 0:
            granted += client.take("api", 1, wait_s=left).granted
        return first_s, granted / seconds


def state_latencies(endpoint: str, seconds: float) -> list[float]:
    with PermitClient(endpoint, reply_timeout_s=5.0) as client:
        end, latencies = time.monotonic() + seconds, []
        while time.monotonic() < end:
            asked_at = time.monotonic()
            client.states()
            latencies.append(time.monotonic() - asked_at)
        return sorted(latencies)


def two_clients_per_s(endpoint: str, seconds: float) -> float:
    """Two clients (threads) taking in a loop: the permits they share per second, counted over
    a common window after a second of warm-up."""
    stamps: list[float] = []
    stop_at = time.monotonic() + seconds + 2.0

    def take_until_stop() -> None:
        with PermitClient(endpoint) as client:
            while time.monotonic() < stop_at:
                client.acquire("api", timeout_s=5.0)
                stamps.append(time.monotonic())

    started = time.monotonic()
    threads = [threading.Thread(target=take_until_stop) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(1 for t in stamps if started + 1.0 <= t < started + 1.0 + seconds) / seconds


def measure(tree: Path, seconds: float) -> Figures:
    with tempfile.TemporaryDirectory(prefix="sm-flood-") as workdir:
        with pulsar(tree, Path(workdir)) as (endpoint, proc):
            two = two_clients_per_s(endpoint, seconds)
        with pulsar(tree, Path(workdir)) as (endpoint, proc):
            with process(["-c", FLOOD_SCRIPT, endpoint], REPO_ROOT) as flood:
                assert flood.stdout is not None
                flood.stdout.readline()
                rss_before = proc.memory_info().rss
                first_s, per_s = take_for(endpoint, seconds)
                latencies = state_latencies(endpoint, 2.0)
                rss_growth = proc.memory_info().rss - rss_before
                os.killpg(flood.pid, signal.SIGKILL)
                # Its last word: requests sent per second on average (into the pulsar's intake and
                # the kernel's buffers, which it fills before a send blocks).
                flood_per_s = float(flood.communicate(timeout=START_DEADLINE_S)[0].split()[-1])
    return Figures(first_s, per_s, latencies[len(latencies) // 2] * 1000, latencies[-1] * 1000,
                   rss_growth / 1e6, flood_per_s, two)


@contextlib.contextmanager
def base_tree(commit: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="sm-base-") as root:
        archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", commit], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
        yield Path(root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="29606e0", help="the commit to compare with")
    parser.add_argument("--seconds", type=float, default=5.0, help="each client's window")
    args = parser.parse_args()
    print(f"pulsar {RATE_PER_S}/s, one peer flooding unread acquires (reserve 1 s), "
          f"a client taking permits for {args.seconds:g} s; load {os.getloadavg()[0]:.1f}", flush=True)
    with base_tree(args.base) as tree:
        base = measure(tree, args.seconds)
    print(base.line(args.base), flush=True)
    head = measure(REPO_ROOT, args.seconds)
    print(head.line("this tree"), flush=True)
    share = RATE_PER_S / 2
    print(f"under the flood: {head.permits_per_s / share:.0%} of the fair share "
          f"(base {base.permits_per_s / share:.0%}); no flood, two clients: "
          f"{head.two_clients_per_s / max(base.two_clients_per_s, 1e-9):.2f}x the base", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
