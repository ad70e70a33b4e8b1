"""Test handler module: setup() loads a 40 MB "model" into the slot's own memory."""
from __future__ import annotations

import os

from slot.handler import Handler, SlotJob, handler

MB = 1024 * 1024


@handler("fat_setup")
class FatSetup(Handler):
    batch_size = 1

    def setup(self) -> None:
        self.model = b"\x03" * (40 * MB)  # written after the fork: Private_Dirty of this slot

    def handle_job(self, job: SlotJob) -> None:
        with open(job.json()["log"], "a") as file:
            file.write(f"{os.getpid()} {job.json()['n']}\n")
