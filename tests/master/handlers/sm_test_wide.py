"""Test handler module for many queues at once: `wide_00` .. `wide_59`, each job sleeping its
`sleep_s` (0.2 s by default), one by one. Slots in more queues than a host can hold."""
from __future__ import annotations

import json
import time

from slot.handler import Handler, SlotJob, handler

WIDE_QUEUES = 60


class Sleeper(Handler):
    """Sleeps the job's `sleep_s`: a stand-in for I/O-bound work that costs no CPU, so a
    shared test machine's load does not change the job time."""

    batch_size = 5

    def handle_job(self, job: SlotJob) -> None:
        time.sleep(float(json.loads(job.data).get("sleep_s", 0.2)))


for _index in range(WIDE_QUEUES):
    _name = f"wide_{_index:02d}"
    # One class per queue: the registry refuses one class for two queues.
    handler(_name)(type(f"Sleeper{_index:02d}", (Sleeper,), {"__module__": __name__}))
