"""Real masters and slots: a slot leaves after max_jobs_per_slot jobs or past max_slot_age_s
(each plus its jitter), its batch finished and acknowledged, and its master forks a fresh one
as after a memory recycle; no job is lost or run twice, and the reason is counted and logged."""
from __future__ import annotations

import json
import re
from collections import Counter as Tally
from pathlib import Path

from master_procs import MasterProc, StartMaster, poll_until

from master.lifecycle import Counter
from master.report import HostReport

QUEUE = "recycled"


def _runs(log: Path) -> list[tuple[int, int, float]]:
    """(pid, n, unix time) per job run, from the handler's log (sm_test_recycle.py)."""
    if not log.exists():
        return []
    runs = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:  # else a line being written
            runs.append((int(parts[0]), int(parts[1]), float(parts[2])))
    return runs


def _recycles(master: MasterProc, reason: str) -> dict[int, str]:
    """pid -> the figure of its recycle line in the master's log ("7" jobs, "1.3" s old)."""
    pattern = rf"\(pid (\d+), queue {QUEUE}\) exit \d+ \(\w+\): recycled: {reason}"
    return {int(pid): figure for pid, figure in re.findall(pattern, master.log_text())}


def _put(master: MasterProc, log: Path, count: int, **extra: float) -> None:
    master.client().put_many(QUEUE, [json.dumps({"log": str(log), "n": n, **extra}) for n in range(count)])


def _all_done(master: MasterProc) -> None:
    client = master.client()
    poll_until(lambda: client.total(QUEUE).jobs == 0 and client.total(QUEUE).running == 0,
               what=lambda: f"every {QUEUE} job done\n{master.log_tail()}")


def _settled(master: MasterProc, slots: int, counted: str) -> HostReport:
    """The report once it counts every recycle the log shows and `slots` serve again."""
    reason = "(\\d+) jobs" if counted == "jobs" else "age ([\\d.]+) s"
    return master.wait_report(
        lambda r: getattr(r, f"recycled_for_{counted}") == len(_recycles(master, reason))
        and sum(1 for s in r.slots if s.queue == QUEUE and s.state == "running") == slots,
        what=f"the report counting every recycle for {counted}, {slots} slots running again")


def test_a_slot_leaves_after_max_jobs_per_slot_plus_its_jitter_and_no_job_is_lost_or_run_twice(
    start_master: StartMaster, tmp_path: Path
) -> None:
    limit, jitter, jobs = 5, 3, 60
    master = start_master(modules=["sm_test_recycle"], static_slots={QUEUE: 2}, queues={QUEUE: {
        "max_jobs_per_slot": limit, "max_jobs_per_slot_jitter": jitter, "lock_timeout_s": 5.0}})
    master.wait_running(QUEUE, 2)
    log = tmp_path / "runs.log"
    _put(master, log, jobs)
    _all_done(master)
    report = _settled(master, 2, "jobs")

    runs = _runs(log)
    # Every job ran once: each slot acknowledged its last batch before it left.
    assert sorted(n for _, n, _ in runs) == list(range(jobs))
    per_pid = Tally(pid for pid, _, _ in runs)
    recycled = {pid: int(figure) for pid, figure in _recycles(master, r"(\d+) jobs").items()}
    # 60 jobs at most 8 a slot: at least 60 / 8 - 2 slots left, and 2 serve on.
    assert len(recycled) >= 6, (recycled, per_pid)
    for pid, taken in recycled.items():
        # The limit plus a jitter of 0..3, run exactly: the last batch was cut to what was left.
        assert limit <= taken <= limit + jitter, recycled
        assert per_pid[pid] == taken, (pid, per_pid, recycled)
    assert max(per_pid.values()) <= limit + jitter
    assert report.recycled_for_jobs == len(recycled)
    assert Counter.RECYCLED_FOR_JOBS not in report.counters  # its own field, for older managers
    assert report.counters.get(Counter.CRASHED, 0) == 0 and not report.crashes
    assert "exit 6 (max_jobs): recycled:" in master.log_text()


def test_a_busy_slot_leaves_past_max_slot_age_s_after_its_batch_and_no_job_is_lost(
    start_master: StartMaster, tmp_path: Path
) -> None:
    age_s, jitter_s, job_s, jobs = 1.0, 0.5, 0.1, 40
    master = start_master(modules=["sm_test_recycle"], static_slots={QUEUE: 1}, queues={QUEUE: {
        "max_slot_age_s": age_s, "max_slot_age_jitter_s": jitter_s, "batch_size": 1}})
    master.wait_running(QUEUE, 1)
    log = tmp_path / "runs.log"
    _put(master, log, jobs, sleep_s=job_s)  # 4 s of work for one slot: it ages out twice at least
    _all_done(master)
    report = _settled(master, 1, "age")

    runs = _runs(log)
    assert sorted(n for _, n, _ in runs) == list(range(jobs))
    recycled = {pid: float(figure) for pid, figure in _recycles(master, r"age ([\d.]+) s").items()}
    assert len(recycled) >= 2, recycled
    for pid, age in recycled.items():
        # Counted by the master from the fork to the reap: never under the limit; over it by
        # the jitter, the batch that ran on (0.1 s) and the exit (a loaded machine: 1 s more).
        assert age_s <= age <= age_s + jitter_s + job_s + 1.0, recycled
        times = [at for run_pid, _, at in runs if run_pid == pid]
        assert max(times) - min(times) <= age_s + jitter_s + job_s + 0.5, (pid, times)
    assert report.recycled_for_age == len(recycled)
    assert report.counters.get(Counter.CRASHED, 0) == 0 and not report.crashes


def test_an_idle_slot_past_its_age_leaves_once_and_its_fresh_fork_waits_for_work(
    start_master: StartMaster, tmp_path: Path
) -> None:
    age_s = 1.0
    master = start_master(modules=["sm_test_recycle"], static_slots={QUEUE: 1},
                          queues={QUEUE: {"max_slot_age_s": age_s}})
    first = master.wait_running(QUEUE, 1).slots[0].pid
    log = tmp_path / "runs.log"
    _put(master, log, 1)
    _all_done(master)
    # Woken while it waits for jobs: it leaves without another job coming.
    fresh = master.wait_report(
        lambda r: r.recycled_for_age == 1 and [s.pid for s in r.slots if s.state == "running"] not in ([], [first]),
        what="the idle slot recycled for its age and a fresh one running").slots[0].pid
    # The fresh slot ran no batch: it stays past its age, not re-forked for nothing.
    report = master.wait_report(lambda r: r.slots and r.slots[0].uptime_s >= 3 * age_s,
                                what=f"the fresh slot {3 * age_s:g} s old")
    assert [s.pid for s in report.slots] == [fresh]
    assert report.recycled_for_age == 1
    assert list(_recycles(master, r"age ([\d.]+) s")) == [first]
