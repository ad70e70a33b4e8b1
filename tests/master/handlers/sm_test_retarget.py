"""Test handler module for retargets during a batch: slow jobs run one by one (one queue whose
slot dies right after a give-back), and a quick queue."""
from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence

from slot.handler import Handler, SlotJob, handler
from slot.source import ClientSource


def record(path: str, line: str) -> None:
    with open(path, "a") as file:
        file.write(line + "\n")


def nap(seconds: float, hurry: str | None) -> None:
    """Sleep `seconds`, or less once the file `hurry` exists: the test writes it when the slow
    jobs have done their part (the retarget came mid-batch) and only their order is left."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if hurry is not None and os.path.exists(hurry):
            return
        time.sleep(min(left, 0.02))


@handler("plod")
class Plod(Handler):
    """0.4 s per job (or the job's `sleep_s`, cut short by its `hurry` file), one by one (the
    default handle()), logging each job's start with its attempt and its end: a batch of 10
    takes 4 s."""

    batch_size = 10

    def handle_job(self, job: SlotJob) -> None:
        request = job.json()
        record(request["log"], f"start {request['n']} {job.attempt} {time.time()}")
        nap(request.get("sleep_s", 0.4), request.get("hurry"))
        record(request["log"], f"end {request['n']} {os.getpid()}")


@handler("quick")
class Quick(Handler):
    """Logs when its job started and in which process."""

    def handle_job(self, job: SlotJob) -> None:
        record(json.loads(job.data)["log"], f"quick {os.getpid()} {time.time()}")


@handler("plod_die")
class PlodThenDie(Plod):
    """As Plod, but its slot dies (exit 7) when it would send the LATER ... FRONT of the jobs
    a retarget gave back: after the give-back, before its acknowledgement reached them."""

    def setup(self) -> None:
        later = ClientSource.later

        def die_at_front(source: ClientSource, ids: Sequence[int], *, delay_s: float | None,
                         front: bool = False) -> None:
            if front:
                os._exit(7)
            later(source, ids, delay_s=delay_s, front=front)

        ClientSource.later = die_at_front  # type: ignore[method-assign]
