"""A master killed -9 under a slot that runs a long job: the orphan finishes it, on its lease."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from master_procs import StartMaster, poll_until

LOCK_S = 1.0
JOB_S = 4.0


def lines(log: Path, word: str) -> list[list[str]]:
    if not log.exists():
        return []
    return [line.split()[1:] for line in log.read_text().splitlines() if line.startswith(word + " ")]


def test_a_slot_whose_master_is_killed_finishes_its_job_without_losing_its_lock(
    start_master: StartMaster, tmp_path: Path
) -> None:
    master = start_master(modules=["sm_test_orphan"], static_slots={"long_job": 1},
                          queues={"long_job": {"batch_size": 1, "lock_timeout_s": LOCK_S}},
                          stop_timeout_s=30.0)
    master.wait_running("long_job", 1)
    log = tmp_path / "long_job.log"
    client = master.client()
    key = client.put_job("long_job", json.dumps({"log": str(log), "s": JOB_S})).key
    [[pid, attempt]] = poll_until(lambda: lines(log, "start"), what="the job started")
    os.kill(master.pid, signal.SIGKILL)
    # The job runs 4 lock times past its master's death: only the orphan renews its lock.
    poll_until(lambda: lines(log, "end"), what="the orphan finished its job")
    job = poll_until(lambda: (found := client.job(key, errors=True)) is not None
                     and found.state not in ("running",) and found, what="the job left running")
    assert (job.state, job.attempts, job.errors) == ("done", 1, []), job
    assert lines(log, "start") == [[pid, attempt]]  # never handed out again
    # The orphan stopped after its job, as on a graceful stop.
    poll_until(lambda: not os.path.exists(f"/proc/{pid}") or _zombie(int(pid)), what="the orphan gone")


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as file:
        return file.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def test_an_orphan_renews_its_lock_no_longer_than_the_stop_timeout(
    start_master: StartMaster, tmp_path: Path
) -> None:
    master = start_master(modules=["sm_test_orphan"], static_slots={"long_job": 1},
                          queues={"long_job": {"batch_size": 1, "lock_timeout_s": LOCK_S}},
                          stop_timeout_s=0.5)
    master.wait_running("long_job", 1)
    log = tmp_path / "long_job.log"
    client = master.client()
    key = client.put_job("long_job", json.dumps({"log": str(log), "s": JOB_S})).key
    poll_until(lambda: lines(log, "start"), what="the job started")
    os.kill(master.pid, signal.SIGKILL)
    # Renewed for 0.5 s, then its 1 s lock lapses while the orphan still runs the job.
    job = poll_until(lambda: (found := client.job(key)) is not None and found.state != "running" and found,
                     what="the lock lapsed")
    assert (job.state, job.attempts, job.error) == ("failed", 1, f"lock expired after {LOCK_S:g} s"), job
    assert not lines(log, "end")
