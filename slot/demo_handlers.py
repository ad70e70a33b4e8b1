"""Demo handlers (entry point `slotmap.handlers: demo`): what `make run` and the demo producer use."""
from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Sequence

from slot.handler import Handler, SlotJob, handler

log = logging.getLogger(__name__)


@handler("demo_noop")
class Noop(Handler):
    """Does nothing: measures the platform's own cost per job."""

    batch_size = 100

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        return None


@handler("demo_echo")
class Echo(Handler):
    """Answers synchronous calls (PUT ... WAIT) with the job's data, upper-cased."""

    batch_size = 20

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        for job in jobs:
            if job.item is not None:
                job.reply(job.data.upper())


@handler("demo_resize")
class ResizePhoto(Handler):
    """Stands in for CPU work on a whole batch: one hash chain per photo, sized by the job."""

    batch_size = 20

    def setup(self) -> None:
        # Per-slot state made after the fork, as a real handler would open its connections.
        self.resized = 0

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        for job in jobs:
            request = job.json()
            digest = str(request.get("photo_id", 0)).encode()
            for _ in range(int(request.get("rounds", 200))):
                digest = hashlib.sha256(digest).digest()
        self.resized += len(jobs)


@handler("demo_flaky")
class Flaky(Handler):
    """Postpones about one job in ten and, rarely, raises on a batch: shows LATER, and failed
    jobs coming back after their backoff (the dashboard's Failed list, `slotmap jobs`)."""

    batch_size = 10

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        if random.random() < 0.02:
            raise RuntimeError("demo failure: this batch's jobs are retried after their backoff")
        for job in jobs:
            if random.random() < 0.1:
                job.later(delay_s=2.0)
        time.sleep(0.001 * len(jobs))
