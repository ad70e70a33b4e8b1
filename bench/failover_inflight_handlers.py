"""Handler module of bench/failover_inflight.py and tests/deploy/test_inflight_failover.py:
jobs that sleep a while and write a line to a log file when they start and end (the job's
key, its attempt, the wall clock), so a run can count who ran how often."""
from __future__ import annotations

import json
import time

from slot.handler import Handler, SlotJob, handler


def note(path: str, event: str, job: SlotJob) -> None:
    """One line `<event> <key> <attempt> <unix time>`, appended in one write (O_APPEND:
    the lines of several slots never interleave)."""
    with open(path, "a") as file:
        file.write(f"{event} {job.key} {job.attempt} {time.time():.6f}\n")


@handler("inflight")
class Inflight(Handler):
    """Sleeps `sleep_s` per job, noting its start and its end in `log`."""

    batch_size = 1

    def handle_job(self, job: SlotJob) -> None:
        request = json.loads(job.data)
        note(request["log"], "start", job)
        time.sleep(float(request["sleep_s"]))
        note(request["log"], "end", job)
