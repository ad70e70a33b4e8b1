"""Test handler module for issue 15: jobs that crash their slot (os._exit), fail, or succeed.

Every job is JSON {"log": path, "n": int, "do": "ok"|"fail"|"exit"}; each run appends
"<what> <pid> <key> <attempt> <n> <unix time>" to the log (job_run_log.py).
"""
from __future__ import annotations

import os
from collections.abc import Sequence

from job_run_log import record

from slot.handler import Handler, SlotJob, handler


def run(job: SlotJob) -> None:
    request = job.json()
    record(job, "start")
    match request["do"]:
        case "fail":
            job.fail(f"job {request['n']} is bad")
            return
        case "exit":
            os._exit(7)
    record(job, "done")


@handler("crash_mix")
class Mix(Handler):
    """handle_job: a job whose handle_job returned is DONE at once; a crash is the slot's end."""

    def handle_job(self, job: SlotJob) -> None:
        run(job)


@handler("crash_done_then_exit")
class DoneThenExit(Handler):
    """handle(jobs): job.done() on each good job as it goes, then a crash on the poison one."""

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        record(jobs[0], f"batch{len(jobs)}")
        for job in jobs:
            run(job)
            if not job.resolved:
                job.done()


@handler("crash_always")
class Always(Handler):
    """Crashes on every job."""

    def handle_job(self, job: SlotJob) -> None:
        record(job, "start")
        os._exit(7)


@handler("crash_neighbour")
class Neighbour(Handler):
    """Good jobs on the same host as crash_always."""

    def handle_job(self, job: SlotJob) -> None:
        run(job)
