"""Test handler module for cancelling running jobs: a job that blocks until its slot is
killed, among good ones. Jobs are JSON {"log": path, "n": int, "do": "ok"|"block"}; each run
appends "<what> <pid> <key> <attempt> <n> <unix time>" to the log (job_run_log.py)."""
from __future__ import annotations

import time

from job_run_log import record

from slot.handler import Handler, SlotJob, handler

# A blocked job waits for its slot's SIGKILL; past this the test has failed anyway.
BLOCK_FOR_S = 120.0


@handler("cancel_in_order")
class InOrder(Handler):
    """handle_job: jobs run one by one, so the master knows which ones never started."""

    def handle_job(self, job: SlotJob) -> None:
        record(job, "start")
        if job.json()["do"] == "block":
            time.sleep(BLOCK_FOR_S)
        record(job, "done")
