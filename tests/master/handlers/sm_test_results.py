"""Test handler module for issue 26 point 3: a handler's return value, job.result(), a result
over max_result_bytes, and a job that waits until the test lets it finish (a flag file)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from slot.handler import Handler, SlotJob, handler


@handler("results_sum")
class Sum(Handler):
    batch_size = 5

    def handle_job(self, job: SlotJob) -> Any:
        request = job.json()
        if request.get("explicit"):
            job.result(b"explicit bytes")
            return None
        if request.get("huger"):
            return "y" * request["huger"]  # over the queue server's max_job_bytes: cannot be sent
        if request.get("huge"):
            return "x" * 5000  # over this queue's max_result_bytes in the test's config
        if request.get("wait_for"):
            flag = Path(request["wait_for"])
            deadline = time.monotonic() + 60.0
            while not flag.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return {"sum": sum(request["numbers"]), "pid": os.getpid()}
