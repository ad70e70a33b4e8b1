"""Restart pacing: a handler that dies at start backs off; a crash in the job loop is replaced
at once, within a per-queue fork budget (a handler crashing on every job cannot fork-bomb)."""
from __future__ import annotations

import itertools

from master.backoff import BootBackoff, ForkBudget


def test_each_failed_start_doubles_the_wait_up_to_the_maximum() -> None:
    backoff = BootBackoff(base_s=0.5, max_s=4.0)
    delays = [backoff.record_failed_start("q", float(n)) for n in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert not backoff.ready("q", 5.0 + 3.9)
    assert backoff.ready("q", 5.0 + 4.0)


def test_a_slot_that_reached_its_loop_resets_its_queue() -> None:
    backoff = BootBackoff()
    backoff.record_failed_start("q", 0.0)
    backoff.record_success("q")
    assert backoff.failures("q") == 0 and backoff.ready("q", 0.0)


def test_other_queues_are_not_slowed_down() -> None:
    backoff = BootBackoff()
    backoff.record_failed_start("broken", 0.0)
    assert backoff.ready("healthy", 0.0)
    assert not backoff.ready("broken", 0.0)


def test_forks_that_replace_crashed_slots_stay_within_the_budget() -> None:
    budget = ForkBudget(per_s=20.0, burst=20.0)  # a handler crashing on every job earns nothing
    forks = []
    now = 0.0
    while now < 10.0:  # every fork crashes at once: a replacement is always owed
        budget.crashed("q")
        if budget.may_fork("q", now):
            forks.append(now)
        now += 0.001
    assert len(forks) <= 20 + 20 * 10 + 1
    # Never more than a twentieth of a second without a fork: the queue is not stalled.
    gaps = [b - a for a, b in itertools.pairwise(forks)]
    assert max(gaps) <= 0.05 + 0.0011


def test_forks_that_replace_nothing_and_other_queues_never_wait() -> None:
    budget = ForkBudget(per_s=5.0, burst=1.0)
    budget.crashed("q")
    assert budget.may_fork("q", 0.0)
    budget.crashed("q")
    assert not budget.may_fork("q", 0.0)
    assert budget.may_fork("other", 0.0)
    assert all(budget.may_fork("fresh", 0.0) for _ in range(100))


def test_a_queue_that_finishes_jobs_earns_forks_beyond_the_base_rate() -> None:
    budget = ForkBudget(per_s=5.0, burst=10.0, jobs_per_fork=10)
    forks = 0
    for step in range(100):  # 1 s: a crash after every 100 jobs finished, 100 crashes
        now = step * 0.01
        budget.earn("q", 100, now)
        budget.crashed("q")
        forks += budget.may_fork("q", now)
    assert forks == 100


def test_work_banks_forks_beyond_the_burst_up_to_the_bank() -> None:
    budget = ForkBudget(per_s=20.0, burst=20.0, jobs_per_fork=10, bank=500.0)
    budget.earn("q", 100_000, 0.0)  # 10,000 forks earned: 500 kept
    forks = 0
    for _ in range(1000):  # all at once, no time passing
        budget.crashed("q")
        forks += budget.may_fork("q", 0.0)
    assert forks == 500
