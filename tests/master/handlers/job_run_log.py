"""The runs log the end-to-end job handlers (sm_test_outcomes.py, sm_test_crashes.py) write
and tests/master/job_runs.py reads: "<what> <pid> <key> <attempt> <n> <unix time>" a line."""
from __future__ import annotations

import os
import time

from slot.handler import SlotJob


def record(job: SlotJob, what: str) -> None:
    request = job.json()
    with open(request["log"], "a") as file:
        file.write(f"{what} {os.getpid()} {job.key} {job.attempt} {request['n']} {time.time()}\n")
