"""A retarget that comes while the slot is busy in a batch, on real processes: the running job
finishes, the jobs not started are given back (LATER ... FRONT, no attempt charged) and run
later, before the jobs that waited behind them and the jobs put since, also when the slot
dies right after the give-back; and the slot starts on its new queue within one job's time,
not after the whole batch."""
from __future__ import annotations

import json
import time
from pathlib import Path

from master_procs import MasterProc, StartMaster, poll_until
from polling import DEADLINE_S

PLOD_JOBS = 10
# The first test's jobs, 1 s each: from the SIGHUP to the first job of the new queue is the
# job that runs plus the master's reload and the slot's switch, with room for a busy shared
# machine (2.5 s against 0.4 s jobs was tight there); the whole batch would take 10 s.
PLOD_JOB_S = 1.0
SWITCH_DEADLINE_S = 6.0


def test_a_slot_busy_in_a_batch_starts_its_new_queue_within_one_job_and_gives_back_the_rest(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    queues = {name: {"lock_timeout_s": 30.0} for name in ("plod", "quick")}
    master = start_master(modules=["sm_test_retarget"], static_slots={"plod": 1}, queues=queues)
    pid = master.wait_running("plod", 1).slots[0].pid
    log = tmp_path / "jobs.log"
    client = master.client()
    hurry = tmp_path / "hurry"
    client.put_many("plod", [json.dumps({"log": str(log), "n": n, "sleep_s": PLOD_JOB_S, "hurry": str(hurry)})
                             for n in range(PLOD_JOBS)])
    poll_until(lambda: log.exists() and "start 1 " in log.read_text(), what="the batch under way")
    client.put("quick", json.dumps({"log": str(log)}))
    asked = time.time()
    master.reload({"quick": 1})
    poll_until(lambda: "quick" in log.read_text(), timeout_s=DEADLINE_S, what="the quick job")
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
    assert "given back to the head of the queue (LATER ... FRONT" in master.log_text()
    assert client.total("plod").running == 0

    # The switch is measured: the jobs given back need not take their second each any more.
    hurry.touch()
    master.reload({"plod": 1})
    poll_until(lambda: log.read_text().count("end ") == PLOD_JOBS, timeout_s=DEADLINE_S,
               what=lambda: log.read_text())
    starts = [line.split() for line in log.read_text().splitlines() if line.startswith("start")]
    # Every job ran once, each on its first attempt: a give-back is no failed attempt.
    assert sorted(int(start[1]) for start in starts) == list(range(PLOD_JOBS))
    assert {start[2] for start in starts} == {"1"}


# A backlog behind the first batch, and jobs put after the give-back: quick ones (0.4 s each
# would make the test long); the first batch's jobs stay slow so the retarget lands in it.
BACKLOG_JOBS = 15
PUT_AFTER_JOBS = 5
QUICK_JOB_S = 0.05


def retarget_mid_batch(start_master: StartMaster, tmp_path: Path, queue: str) -> tuple[MasterProc, Path]:
    """A master with one slot on `queue`: put a batch of slow jobs and a backlog behind it, and
    send the slot to quick while it runs the second job or so."""
    queues = {name: {"lock_timeout_s": 30.0} for name in (queue, "quick")}
    master = start_master(modules=["sm_test_retarget"], static_slots={queue: 1}, queues=queues)
    master.wait_running(queue, 1)
    log = tmp_path / "jobs.log"
    client = master.client()
    slow = [json.dumps({"log": str(log), "n": n, "hurry": str(tmp_path / "hurry")})
            for n in range(PLOD_JOBS)]
    backlog = [json.dumps({"log": str(log), "n": n, "sleep_s": QUICK_JOB_S})
               for n in range(PLOD_JOBS, PLOD_JOBS + BACKLOG_JOBS)]
    client.put_many(queue, slow + backlog)
    poll_until(lambda: log.exists() and "start 1 " in log.read_text(), what="the batch under way")
    client.put("quick", json.dumps({"log": str(log)}))
    master.reload({"quick": 1})
    return master, log


def come_back_in_put_order(master: MasterProc, queue: str, log: Path) -> None:
    """With the given-back jobs back in `queue`, put more behind them, send a slot back to it,
    and check every job ran once, on its first attempt, in the order it was put."""
    # The slow jobs were slow for the retarget to land mid-batch: given back, they may hurry.
    (log.parent / "hurry").touch()
    client = master.client()
    first = PLOD_JOBS + BACKLOG_JOBS
    client.put_many(queue, [json.dumps({"log": str(log), "n": n, "sleep_s": QUICK_JOB_S})
                            for n in range(first, first + PUT_AFTER_JOBS)])
    master.reload({queue: 1})
    total = first + PUT_AFTER_JOBS
    poll_until(lambda: log.read_text().count("end ") == total, timeout_s=30.0,
               what=lambda: f"{log.read_text()}\n{master.log_tail()}")
    starts = [line.split() for line in log.read_text().splitlines() if line.startswith("start")]
    # FIFO kept: the jobs given back ran before the backlog that waited behind them and the jobs
    # put after them (with a plain LATER they ran after the backlog: 0, 1, 11..24, 2..10, 25..29).
    assert [int(start[1]) for start in starts] == list(range(total))
    assert {start[2] for start in starts} == {"1"}


def test_jobs_given_back_run_before_the_backlog_behind_them_and_the_jobs_put_after(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    master, log = retarget_mid_batch(start_master, tmp_path, "plod")
    poll_until(lambda: "quick" in log.read_text(), timeout_s=DEADLINE_S, what="the quick job")
    assert master.client().total("plod").running == 0  # acknowledged before the slot moved
    come_back_in_put_order(master, "plod", log)


def test_jobs_given_back_by_a_slot_that_dies_before_acknowledging_keep_their_place(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    master, log = retarget_mid_batch(start_master, tmp_path, "plod_die")
    # The slot died at its LATER ... FRONT: its master sends it from the give-back notes,
    # charging nobody (the job that ran when the map came had returned).
    poll_until(lambda: "outcomes honoured, 0 given back uncharged, 0 charged" in master.log_text(),
               timeout_s=DEADLINE_S, what=lambda: master.log_tail())
    client = master.client()
    poll_until(lambda: client.total("plod_die").running == 0, what="the jobs given back")
    come_back_in_put_order(master, "plod_die", log)
