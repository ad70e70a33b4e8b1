"""Test handler module: a job that outlives its lock time (renewed by whoever renews it)."""
from __future__ import annotations

import os
import time

from slot.handler import Handler, SlotJob, handler


def record(path: str, line: str) -> None:
    with open(path, "a") as file:
        file.write(line + "\n")


@handler("long_job")
class LongJob(Handler):
    batch_size = 1

    def handle_job(self, job: SlotJob) -> None:
        request = job.json()
        record(request["log"], f"start {os.getpid()} {job.attempt}")
        time.sleep(request["s"])
        record(request["log"], f"end {os.getpid()} {job.attempt}")
