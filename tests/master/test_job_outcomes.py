"""Issue 9 end to end: real queue server, master and slots; jobs that raise, kill their slot,
or outlive their lock (handlers in handlers/sm_test_outcomes.py)."""
from __future__ import annotations

import time
from typing import Any

from job_runs import JobCluster, dead_job, done_numbers, oks_but, put_jobs, runs
from master_procs import poll_until
from polling import DEADLINE_S

from master.lifecycle import Counter

MODULES = ["sm_test_outcomes"]
# Small backoff so retries come within the test: 0.3 s, then 0.6 s (+0-25% jitter).
FAST_RETRIES: dict[str, Any] = {"max_attempts": 3, "retry_base_s": 0.3, "retry_max_s": 2.0}


def test_a_raising_job_fails_alone_and_is_dead_after_three_attempts_with_its_traceback(
    job_cluster: JobCluster
) -> None:
    queue = "outcomes_one_by_one"
    log = job_cluster.log
    master, keys = job_cluster.start(queue, 1, {"batch_size": 20, **FAST_RETRIES}, oks_but(20, {7: "raise"}))
    dead = dead_job(master, keys[7], timeout_s=30.0)

    first_pass = [run for run in runs(log, "start") if run.attempt == 1]
    assert sorted(run.n for run in first_pass) == list(range(20))
    assert len({run.pid for run in first_pass}) == 1
    assert done_numbers(log) == set(range(20)) - {7}
    assert all(run.attempt == 1 for run in runs(log, "done"))
    # The failing job ran three times, each after its backoff (jitter only adds).
    tries = runs(log, "start", n=7)
    assert [run.attempt for run in tries] == [1, 2, 3]
    assert tries[1].at - tries[0].at >= 0.3 * 0.9
    assert tries[2].at - tries[1].at >= 0.6 * 0.9
    assert dead.attempts == 3
    assert dead.error.startswith("Traceback (most recent call last):")
    assert dead.error.endswith("ValueError: job 7 cannot be handled")
    stats = master.client().stats(queue)[queue]
    assert stats.done == 19


def test_a_batch_handler_that_raises_fails_its_unresolved_jobs_which_then_run_alone(
    job_cluster: JobCluster
) -> None:
    queue = "outcomes_batch"
    log = job_cluster.log
    master, keys = job_cluster.start(queue, 1, {"batch_size": 20, **FAST_RETRIES}, oks_but(5, {2: "raise"}))
    dead = dead_job(master, keys[2], timeout_s=30.0)
    poll_until(lambda: done_numbers(log) == {0, 1, 3, 4}, what="the batch-mates done")
    batches = [run for run in runs(log) if run.what.startswith("batch")]
    assert batches[0].what == "batch5" and batches[0].attempt == 1
    # After the failed batch every job came back SOLO: batches of one.
    assert {run.what for run in batches[1:]} == {"batch1"}
    # The batch-mates paid one attempt for the failed batch, not three: each finished its
    # second run (the first one's work was not acknowledged, so it ran again).
    assert {run.n: run.attempt for run in runs(log, "start") if run.n != 2} == {0: 2, 1: 2, 3: 2, 4: 2}
    assert dead.attempts == 3 and "ValueError: job 2 cannot be handled" in dead.error


def test_a_job_that_kills_its_slot_is_dead_within_seconds_and_its_batch_mates_are_done(
    job_cluster: JobCluster
) -> None:
    queue = "outcomes_one_by_one"
    log = job_cluster.log
    started = time.monotonic()
    # The lock time is far beyond the test: only the master's FAIL can bring the jobs back.
    master, keys = job_cluster.start(queue, 2, {"batch_size": 10, "lock_timeout_s": 600.0, **FAST_RETRIES},
                                     oks_but(10, {4: "exit"}))
    dead = dead_job(master, keys[4], timeout_s=60.0)
    dead_after_s = time.monotonic() - started
    poll_until(lambda: done_numbers(log) == set(range(10)) - {4}, what="the batch-mates done")
    neighbours_done_after_s = time.monotonic() - started
    first_run = runs(log, "start", n=4)[0].at
    last_done = max(run.at for run in runs(log, "done"))
    print(f"from its first run the poison job was dead after {dead.died_at - first_run:.2f} s "
          f"and its batch-mates done after {last_done - first_run:.2f} s; from the test's start: "
          f"dead {dead_after_s:.2f} s, all done {neighbours_done_after_s:.2f} s")
    assert dead.attempts == 3
    assert "exit 7" in dead.error and dead.error.startswith("slot ")
    # handle_job runs the batch in order: the crash named the first job without an outcome,
    # so each of its three crashes was charged to it.
    assert [run.attempt for run in runs(log, "start", n=4)] == [1, 2, 3]
    # Its batch-mates: 0-3 were DONE before the crash, 5-9 never started and came back uncharged.
    assert all(run.attempt == 1 for run in runs(log, "done"))
    # Crashes in the job loop cost no restart backoff; the lock time (600 s) is never waited
    # (seconds here; the bound is for a busy shared machine).
    assert dead_after_s < 60.0
    report = master.wait_report(lambda r: r.counters.get(Counter.CRASHED, 0) >= 3, what="3 crashes")
    assert report.counters.get(Counter.JOBS_OF_DEAD_SLOTS_FAILED, 0) == 3
    assert report.counters.get(Counter.JOBS_OF_DEAD_SLOTS_HONOURED, 0) == 4
    assert report.counters.get(Counter.JOBS_OF_DEAD_SLOTS_GIVEN_BACK, 0) == 5
    assert ("4 outcomes honoured, 5 given back uncharged, 1 charged (job outcomes_one_by_one-4)"
            in master.log_text())


def test_a_job_longer_than_its_lock_time_runs_once_under_a_live_slot(
    job_cluster: JobCluster
) -> None:
    queue = "outcomes_one_by_one"
    log = job_cluster.log
    master, _ = job_cluster.start(queue, 2, {"batch_size": 1, "lock_timeout_s": 1.0, **FAST_RETRIES}, [])
    master.wait_running(queue, 2)
    client = master.client()
    [key] = put_jobs(client, queue, log, ["sleep"], sleep_s=3.5)
    [started] = poll_until(lambda: runs(log, "start"), what="the long job started")
    info = client.job(key)
    assert info is not None and (info.state, info.attempts) == ("running", 1), info
    [done] = poll_until(lambda: runs(log, "done"), timeout_s=DEADLINE_S, what="the long job done")
    # It ran past three lock times while the other slot waited idle: its lock was renewed,
    # or that slot would have run it a second time.
    assert done.at - started.at >= 3.5
    assert [run.attempt for run in runs(log, "start")] == [1]
    # The handler writes "done" before its slot sends DONE: the server's count follows.
    stats = poll_until(lambda: (now := client.stats(queue)[queue]).done and now, what="the job's DONE")
    assert (stats.done, stats.expired) == (1, 0)
    finished = client.job(key)  # kept as a finished job, run once
    assert finished is not None and (finished.state, finished.attempts) == ("done", 1)


def test_a_handlers_own_retry_policy_makes_the_job_dead_after_its_max_attempts(
    job_cluster: JobCluster
) -> None:
    queue = "outcomes_own_policy"
    # The queue allows 25 attempts with a 15 s first wait; the handler class says 2 and 0.1 s.
    master, [key] = job_cluster.start(queue, 1, {}, ["raise"])
    dead = dead_job(master, key, timeout_s=DEADLINE_S)
    tries = runs(job_cluster.log, "start")
    assert [run.attempt for run in tries] == [1, 2]
    assert 0.1 * 0.9 <= tries[1].at - tries[0].at < 10.0
    assert dead.attempts == 2
