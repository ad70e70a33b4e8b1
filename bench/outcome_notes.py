"""What keeping outcomes across a crash costs per job (issue 15), the two ways it could be done:

- an outcome note: one short write(2) to the master's pipe per outcome (what we do; the
  master reads the pipe every tick and parses nothing unless the slot dies);
- acknowledging each outcome at once: one DONE round trip to the queue server per job,
  instead of one multi-id DONE per batch.

Usage: .venv/bin/python bench/outcome_notes.py [--jobs 20000]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "queue_server"))
sys.path.insert(0, str(REPO / "tests"))

from server_proc import running_queue_server  # noqa: E402

from queue_server.client import QueueClient  # noqa: E402
from slot.handler import SlotJob, set_outcome_hook  # noqa: E402
from slot.leases import LeaseReporter  # noqa: E402


def notes_us(jobs: int) -> float:
    """µs per job: an outcome (a job.fail()) told to the master through a real pipe, drained by
    a reader."""
    read_fd, write_fd = os.pipe()
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set() or os.read(read_fd, 65536):
            if not os.read(read_fd, 65536):
                break

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    reporter = LeaseReporter(write_fd, slot_id=1, pid=os.getpid())
    batch = [SlotJob("q", n, 0, b"", None, f"_{n}", 1) for n in range(jobs)]
    set_outcome_hook(reporter.resolved)
    started = time.perf_counter()
    for job in batch:
        job.fail("x")  # a DONE would go to the shared page; every other outcome is a note
    elapsed = time.perf_counter() - started
    set_outcome_hook(None)
    stop.set()
    os.close(write_fd)
    reader.join(5)
    os.close(read_fd)
    return elapsed / jobs * 1e6


def bare_us(jobs: int) -> float:
    """µs per job: job.fail() with nobody told (the code before issue 15)."""
    batch = [SlotJob("q", n, 0, b"", None, f"_{n}", 1) for n in range(jobs)]
    started = time.perf_counter()
    for job in batch:
        job.fail("x")
    return (time.perf_counter() - started) / jobs * 1e6


def done_us(jobs: int, batch: int) -> tuple[float, float]:
    """µs per job: one DONE per job against one multi-id DONE per batch, on a real server."""
    with tempfile.TemporaryDirectory() as work, running_queue_server(Path(work), "--fsync", "never") as server:
        with QueueClient(server.address) as client:
            client.put_many("q", [b""] * (2 * jobs))
            each = 0.0
            for _ in range(jobs // batch):
                taken = client.get("q", count=batch, expire_s=60)
                started = time.perf_counter()
                for job in taken:
                    client.done(job.id)
                each += time.perf_counter() - started
            together = 0.0
            for _ in range(jobs // batch):
                taken = client.get("q", count=batch, expire_s=60)
                started = time.perf_counter()
                client.done(*(job.id for job in taken))
                together += time.perf_counter() - started
    return each / jobs * 1e6, together / jobs * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    bare = min(bare_us(args.jobs) for _ in range(3))
    noted = min(notes_us(args.jobs) for _ in range(3))
    each, together = done_us(args.jobs, args.batch)
    print(f"per job, {args.jobs} jobs, batch {args.batch}; load {os.getloadavg()[0]:.1f}")
    print(f"job.fail(), nobody told:              {bare:7.2f} us")
    print(f"job.fail() + outcome note (pipe):     {noted:7.2f} us  (+{noted - bare:.2f})")
    print(f"DONE at once, one round trip per job: {each:7.2f} us")
    print(f"DONE per batch, one multi-id DONE:    {together:7.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
