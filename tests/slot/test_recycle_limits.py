"""When a slot leaves after jobs or an age (slot/recycling.py), and the config keys behind it."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from config.errors import ConfigError
from config.load import load_config
from slot.beacon import Assignment
from slot.exit_codes import SlotExit
from slot.recycling import JitterDraw, age_limit_s, job_limit, jobs_left, recycle_due


def assignment(**limits: float) -> Assignment:
    return Assignment(queue="q", batch_size=10, lock_timeout_s=2.0, private_dirty_limit_bytes=1 << 30,
                      **limits)  # type: ignore[arg-type]


def test_no_limit_by_default_whatever_the_slot_did() -> None:
    draw = JitterDraw(0.5, 0.5)
    assert job_limit(assignment(), draw) is None and age_limit_s(assignment(), draw) is None
    assert jobs_left(assignment(), draw, jobs_taken=10**9) is None
    assert recycle_due(assignment(), draw, jobs_taken=10**9, batches=10**6, age_s=1e9) is None


def test_the_jobs_jitter_adds_each_whole_number_from_0_to_the_jitter_and_never_less() -> None:
    rng = random.Random(7)
    limits = assignment(max_jobs_per_slot=1000, max_jobs_per_slot_jitter=4)
    drawn = [job_limit(limits, JitterDraw.draw(rng)) for _ in range(2000)]
    assert set(drawn) == {1000, 1001, 1002, 1003, 1004}
    assert min(drawn.count(n) for n in set(drawn)) > 300  # about 400 each: evenly spread
    assert job_limit(limits, JitterDraw(0.9999999, 0.0)) == 1004


def test_the_age_jitter_spreads_slots_between_the_limit_and_the_limit_plus_the_jitter() -> None:
    rng = random.Random(7)
    limits = assignment(max_slot_age_s=3600.0, max_slot_age_jitter_s=300.0)
    drawn = [age_limit_s(limits, JitterDraw.draw(rng)) or 0.0 for _ in range(2000)]
    assert 3600.0 <= min(drawn) < 3610.0 and 3890.0 < max(drawn) < 3900.0


def test_the_last_batch_is_cut_to_the_jobs_left_and_the_slot_leaves_at_its_limit() -> None:
    limits, draw = assignment(max_jobs_per_slot=5, max_jobs_per_slot_jitter=3), JitterDraw(0.5, 0.0)
    assert job_limit(limits, draw) == 7
    assert jobs_left(limits, draw, jobs_taken=4) == 3
    assert recycle_due(limits, draw, jobs_taken=6, batches=2, age_s=0.0) is None
    due = recycle_due(limits, draw, jobs_taken=7, batches=3, age_s=0.0)
    assert due is not None and due.exit_code is SlotExit.MAX_JOBS
    assert due.why == "took 7 jobs (max_jobs_per_slot 5, 7 with its jitter)"


def test_a_slot_leaves_for_its_age_only_once_it_has_run_a_batch() -> None:
    limits, draw = assignment(max_slot_age_s=10.0, max_slot_age_jitter_s=2.0), JitterDraw(0.0, 0.5)
    assert recycle_due(limits, draw, jobs_taken=0, batches=0, age_s=500.0) is None
    assert recycle_due(limits, draw, jobs_taken=1, batches=1, age_s=10.9) is None
    due = recycle_due(limits, draw, jobs_taken=1, batches=1, age_s=11.0)
    assert due is not None and due.exit_code is SlotExit.MAX_AGE


@pytest.mark.parametrize("table, words", [
    ("max_jobs_per_slot_jitter = 50", "max_jobs_per_slot_jitter (50) needs max_jobs_per_slot"),
    ("max_slot_age_jitter_s = 60", "max_slot_age_jitter_s (60) needs max_slot_age_s"),
    ("max_jobs_per_slot = -1", "queues.q.max_jobs_per_slot"),
    ("max_jobs_per_slot = 1_000_000_001", "queues.q.max_jobs_per_slot"),
    ("max_jobs_per_slot = 10.0", "queues.q.max_jobs_per_slot: expected an integer"),
    ("max_slot_age_s = inf", "queues.q.max_slot_age_s"),
    ("max_slot_age_s = nan", "queues.q.max_slot_age_s"),
    ("max_slot_age_s = \"3600\"", "queues.q.max_slot_age_s: expected a number"),
    ("max_slot_age_jitter_s = -1.0\nmax_slot_age_s = 5", "queues.q.max_slot_age_jitter_s"),
])
def test_recycling_keys_out_of_bounds_or_a_jitter_alone_are_refused_naming_the_key(
    tmp_path: Path, table: str, words: str
) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(f"[queues.q]\n{table}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert words in str(caught.value)


def test_recycling_keys_reach_the_slots_assignment(tmp_path: Path) -> None:
    from master.assignments import assignment_for
    from slot.handler import Handler

    path = tmp_path / "cluster.toml"
    path.write_text("[queues.q]\nmax_jobs_per_slot = 1000\nmax_jobs_per_slot_jitter = 50\n"
                    "max_slot_age_s = 3600\nmax_slot_age_jitter_s = 300\n")
    given = assignment_for(load_config(path), Handler, "q")
    assert (given.max_jobs_per_slot, given.max_jobs_per_slot_jitter) == (1000, 50)
    assert (given.max_slot_age_s, given.max_slot_age_jitter_s) == (3600.0, 300.0)
