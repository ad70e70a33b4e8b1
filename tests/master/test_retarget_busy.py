"""A retarget that comes while the slot is busy in a batch, on real processes: the running job
finishes, the jobs not started are given back (LATER, no attempt charged) and run later, and
the slot starts on its new queue within one job's time, not after the whole batch."""
from __future__ import annotations

import json
import time
from pathlib import Path

from master_procs import StartMaster, poll_until

PLOD_JOBS = 10
PLOD_JOB_S = 0.4
# From the SIGHUP to the first job of the new queue: the job that runs (0.4 s) plus the
# master's reload and the slot's switch, with room for a busy box; the whole batch would
# take 4 s.
SWITCH_DEADLINE_S = 2.5


def test_a_slot_busy_in_a_batch_starts_its_new_queue_within_one_job_and_gives_back_the_rest(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    queues = {name: {"lock_timeout_s": 30.0} for name in ("plod", "quick")}
    master = start_master(modules=["sm_test_retarget"], static_slots={"plod": 1}, queues=queues)
    pid = master.wait_running("plod", 1).slots[0].pid
    log = tmp_path / "jobs.log"
    client = master.client()
    client.put_many("plod", [json.dumps({"log": str(log), "n": n}) for n in range(PLOD_JOBS)])
    poll_until(lambda: log.exists() and "start 1 " in log.read_text(), what="the batch under way")
    client.put("quick", json.dumps({"log": str(log)}))
    asked = time.time()
    master.reload({"quick": 1})
    poll_until(lambda: "quick" in log.read_text(), timeout_s=10.0, what="the quick job")
    lines = log.read_text().splitlines()
    quick = next(line.split() for line in lines if line.startswith("quick"))
    assert int(quick[1]) == pid  # retargeted, not forked
    assert float(quick[2]) - asked < SWITCH_DEADLINE_S
    before = lines[: lines.index(" ".join(quick))]
    started_before = {line.split()[1] for line in before if line.startswith("start")}
    ended_before = {line.split()[1] for line in before if line.startswith("end")}
    # The job that ran when the map came was finished, not interrupted; most were given back.
    assert started_before == ended_before
    assert len(started_before) < PLOD_JOBS - 2
    assert "given back (LATER, no attempt charged)" in master.log_text()
    assert client.total("plod").running == 0

    master.reload({"plod": 1})
    poll_until(lambda: log.read_text().count("end ") == PLOD_JOBS, timeout_s=20.0,
               what=lambda: log.read_text())
    starts = [line.split() for line in log.read_text().splitlines() if line.startswith("start")]
    # Every job ran once, each on its first attempt: a give-back is no failed attempt.
    assert sorted(int(start[1]) for start in starts) == list(range(PLOD_JOBS))
    assert {start[2] for start in starts} == {"1"}
