"""Test handler module for retargets during a batch: slow jobs run one by one, and a quick queue."""
from __future__ import annotations

import json
import os
import time

from slot.handler import Handler, SlotJob, handler


def record(path: str, line: str) -> None:
    with open(path, "a") as file:
        file.write(line + "\n")


@handler("plod")
class Plod(Handler):
    """0.4 s per job, one by one (the default handle()), logging each job's start with its
    attempt and its end: a batch of 10 takes 4 s."""

    batch_size = 10

    def handle_job(self, job: SlotJob) -> None:
        request = job.json()
        record(request["log"], f"start {request['n']} {job.attempt} {time.time()}")
        time.sleep(0.4)
        record(request["log"], f"end {request['n']} {os.getpid()}")


@handler("quick")
class Quick(Handler):
    """Logs when its job started and in which process."""

    def handle_job(self, job: SlotJob) -> None:
        record(json.loads(job.data)["log"], f"quick {os.getpid()} {time.time()}")
