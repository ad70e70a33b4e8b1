"""Test handler module: handlers that leak, hang, freeze, work slowly or fail to set up."""
from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Sequence

from slot.handler import Handler, SlotJob, handler

MB = 1024 * 1024
LEAK: list[bytes] = []


def first_time(marker: str) -> bool:
    """True once per marker path across all slots (O_EXCL is atomic)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def record(path: str, line: str) -> None:
    with open(path, "a") as file:
        file.write(line + "\n")


@handler("leaky")
class Leaky(Handler):
    """Keeps 4 MB of written memory per job, like a cache that never forgets; 50 ms a job."""

    batch_size = 1

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        for job in jobs:
            LEAK.append(b"\x02" * (4 * MB))
            time.sleep(0.05)
            request = job.json()
            record(request["log"], f"{os.getpid()} {request['n']}")


@handler("sleepy")
class Sleepy(Handler):
    """The first job ever sleeps for an hour (a Python-level hang); later ones are quick.
    Its lock is renewed while the slot lives: only batch_timeout_s ends the hang."""

    batch_timeout_s = 1.0

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        for job in jobs:
            request = job.json()
            if first_time(request["marker"]):
                record(request["log"], f"hang {os.getpid()}")
                time.sleep(3600)
            record(request["log"], f"done {request['n']}")


@handler("deaf")
class Deaf(Sleepy):
    """Sleepy without its 1 s batch timeout: only the master's stop deadline ends the hang
    (with Sleepy's, a SIGTERM that reached a loaded master more than 1 s after the hang began
    found the slot already killed as hung)."""

    batch_timeout_s = 3600.0


@handler("frozen")
class Frozen(Handler):
    """The first job ever stops the whole process (SIGSTOP): no beacon thread either."""

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        for job in jobs:
            request = job.json()
            if first_time(request["marker"]):
                record(request["log"], f"freeze {os.getpid()}")
                os.kill(os.getpid(), signal.SIGSTOP)
            record(request["log"], f"done {request['n']}")


@handler("slow")
class Slow(Handler):
    """20 ms per job, logging each batch's start (with the pid) and each job it finished."""

    batch_size = 10

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        log = json.loads(jobs[0].data)["log"]
        record(log, f"start {os.getpid()} {len(jobs)}")
        time.sleep(0.02 * len(jobs))
        for job in jobs:
            record(log, f"done {job.json()['n']}")


@handler("stubborn")
class Stubborn(Handler):
    """setup() always fails: the master must back off, not fork in a tight loop."""

    def setup(self) -> None:
        raise ConnectionRefusedError("the database of stubborn is down")

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        raise AssertionError("never reached")


@handler("whoami")
class WhoAmI(Handler):
    """Answers calls with the slot's pid and queue: shows a retarget kept the process."""

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        for job in jobs:
            job.reply(f"{os.getpid()} {self.queue}")


@handler("whoami_too")
class WhoAmIToo(WhoAmI):
    pass

