"""Test handler module for issue 9: jobs that raise, kill their slot, or outlive their lock.

Every job is JSON {"log": path, "n": int, "do": "ok"|"raise"|"exit"|"sleep", "sleep_s": float};
each run appends "<what> <pid> <key> <attempt> <n> <unix time>" to the log (job_run_log.py).
"""
from __future__ import annotations

import os
import time
from collections.abc import Sequence

from job_run_log import record

from slot.handler import Handler, SlotJob, handler


def run(job: SlotJob) -> None:
    request = job.json()
    record(job, "start")
    match request["do"]:
        case "raise":
            raise ValueError(f"job {request['n']} cannot be handled")
        case "exit":
            # A crash below Python (segfault, OOM kill) looks the same to the master.
            os._exit(7)
        case "sleep":
            time.sleep(request["sleep_s"])
    record(job, "done")


@handler("outcomes_one_by_one")
class OneByOne(Handler):
    """handle_job: a raising job fails alone, its batch-mates are DONE."""

    batch_size = 20

    def handle_job(self, job: SlotJob) -> None:
        run(job)


@handler("outcomes_batch")
class WholeBatch(Handler):
    """handle(jobs): logs the batch size first; an exception fails every unresolved job."""

    batch_size = 20

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        record(jobs[0], f"batch{len(jobs)}")
        for job in jobs:
            run(job)


@handler("outcomes_own_policy")
class OwnPolicy(Handler):
    """Overrides the queue's retry policy: 2 attempts, 0.1 s first wait."""

    batch_size = 5
    max_attempts = 2
    retry_base_s = 0.1
    retry_max_s = 0.5

    def handle_job(self, job: SlotJob) -> None:
        run(job)
