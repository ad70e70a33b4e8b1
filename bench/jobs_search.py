"""JOBS search (issue 26 point 4): the server's work for one request, in-process (the store and
job_search.search_jobs, as the door calls them; the JSON encoding of the matches included).

A queue of N ready jobs (32-byte data, keys given by the producer): a search whose prefix
matches nothing examines SCAN jobs (the worst per request: every job examined, none kept);
one with no filter fills LIMIT 100; one that starts 90% down the listing walks to AFTER
first, or resumes at its position (AT) once that job is gone. Best of 5 runs each.

    .venv/bin/python bench/jobs_search.py [--jobs 1000000]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

# The repo first: bench/queue_server.py would shadow the package (this folder is sys.path[0]).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from queue_server.protocol.job_positions import parse_position
from queue_server.protocol.job_search import JobsSearch
from queue_server.server.job_search import search_jobs
from queue_server.server.job_views import jobs_view, json_block
from queue_server.server.store import Store


def best_ms(work: Callable[[], object], runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1_000_000)
    jobs = parser.parse_args().jobs
    store = Store()
    now = time.time()
    for index in range(jobs):
        store.put("big", 0, b"x" * 32, None, now, key=f"photo-{index}")
    print(f"{jobs:,} ready jobs in one queue")
    for scan in (5_000, 10_000, 100_000):
        search = JobsSearch(prefix="nomatch", scan=scan)
        ms = best_ms(lambda s=search: json_block(search_jobs(store, "big", "ready", 100, None, s)))
        print(f"  prefix matching nothing, SCAN {scan:>7,}: {ms:7.2f} ms")
    plain = JobsSearch(scan=5_000)
    ms = best_ms(lambda: json_block(search_jobs(store, "big", "ready", 100, None, plain)))
    print(f"  no filter, LIMIT 100:                  {ms:7.2f} ms")
    error = JobsSearch(error_type="ValueError", scan=5_000)
    ms = best_ms(lambda: json_block(search_jobs(store, "big", "ready", 100, None, error)))
    print(f"  ERROR filter (views built), SCAN 5,000: {ms:7.2f} ms")
    after = f"photo-{jobs * 9 // 10}"
    far = JobsSearch(prefix="nomatch", scan=5_000)
    ms = best_ms(lambda: json_block(search_jobs(store, "big", "ready", 100, after, far)))
    print(f"  from AFTER 90% down, SCAN 5,000:       {ms:7.2f} ms")
    # AFTER ... AT (job_positions.py): the page resumes at the position, the AFTER job gone.
    [row] = jobs_view(store, "big", "ready", 1, f"photo-{jobs * 9 // 10 - 1}")
    at = parse_position("ready", row["position"].encode())
    store.delete("big", [after])
    ms = best_ms(lambda: json_block(search_jobs(store, "big", "ready", 100, after, far, at)))
    print(f"  from AT 90% down (AFTER gone), SCAN 5,000: {ms:7.2f} ms")


if __name__ == "__main__":
    main()
