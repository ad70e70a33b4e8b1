"""Test handler module: handlers that keep the GIL in C code for seconds (no beacon meanwhile)."""
from __future__ import annotations

import ctypes
import os
import random
import time

from slot.handler import Handler, SlotJob, handler


def record(path: str, line: str) -> None:
    with open(path, "a") as file:
        file.write(line + "\n")


@handler("gil_sort")
class GilSort(Handler):
    """sorted() of a shuffled list: CPU in C with the GIL held (3 s for 3 million numbers on
    the 2-core test machine), so the slot's beacon thread stays silent meanwhile."""

    batch_size = 1

    def handle_job(self, job: SlotJob) -> None:
        request = job.json()
        numbers = list(range(request["count"]))
        random.Random(7).shuffle(numbers)
        started = time.monotonic()
        sorted(numbers)
        record(request["log"], f"sorted {os.getpid()} {job.attempt} {time.monotonic() - started:.3f}")


@handler("gil_sleep")
class GilSleep(Handler):
    """Sleeps in C with the GIL held (ctypes.PyDLL keeps it): silent and idle, as a deadlock."""

    batch_size = 1

    def handle_job(self, job: SlotJob) -> None:
        request = job.json()
        record(request["log"], f"sleeping {os.getpid()} {job.attempt}")
        ctypes.PyDLL(None).sleep(3600)
