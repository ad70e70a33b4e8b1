"""Test handler module: a queue whose slots are recycled after jobs or an age (test_master_recycling.py).
Each job appends "<pid> <n> <unix time>" to the log its data names, after `sleep_s`."""
from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence

from slot.handler import Handler, SlotJob, handler


@handler("recycled")
class Recycled(Handler):
    batch_size = 3

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        for job in jobs:
            request = json.loads(job.data)
            time.sleep(request.get("sleep_s", 0.0))
            with open(request["log"], "a") as file:
                file.write(f"{os.getpid()} {request['n']} {time.time()}\n")
