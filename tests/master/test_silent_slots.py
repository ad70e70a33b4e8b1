"""Real slots whose beacons stop: busy in C code that holds the GIL (kept) or stuck (killed)."""
from __future__ import annotations

import json
from pathlib import Path

from master_procs import StartMaster, poll_until

from master.lifecycle import Counter

# 3 beacons of 100 ms: a GIL held for more than 0.3 s silences the slot past its allowance.
SILENT_AFTER_S = 0.3


def lines(log: Path, word: str) -> list[list[str]]:
    if not log.exists():
        return []
    return [line.split()[1:] for line in log.read_text().splitlines() if line.startswith(word + " ")]


def test_a_job_that_holds_the_gil_for_seconds_in_c_code_is_not_killed_as_hung(
    start_master: StartMaster, tmp_path: Path
) -> None:
    master = start_master(modules=["sm_test_gil"], static_slots={"gil_sort": 1},
                          queues={"gil_sort": {"batch_size": 1}}, hung_after_beacons=3)
    master.wait_running("gil_sort", 1)
    log = tmp_path / "gil_sort.log"
    key = master.client().put_job("gil_sort", json.dumps({"log": str(log), "count": 3_000_000})).key
    [[pid, attempt, held_s]] = poll_until(lambda: lines(log, "sorted"), what="the sort finished")
    # The premise: the slot was silent for many allowances.
    assert float(held_s) > 3 * SILENT_AFTER_S, held_s
    assert attempt == "1"
    report = master.wait_report(lambda r: r.counters.get(Counter.KILLED_HUNG, 0) == 0
                                and any(s.pid == int(pid) and s.state == "running" for s in r.slots),
                                what="the same slot still running")
    assert report.crashes == []
    client = master.client()
    job = poll_until(lambda: (found := client.job(key)) is not None and found.state == "done" and found,
                     what="the job done")
    assert job.attempts == 1
    assert "hung" not in master.log_text()


def test_a_slot_silent_and_idle_in_c_code_that_holds_the_gil_is_killed_as_hung(
    start_master: StartMaster, tmp_path: Path
) -> None:
    master = start_master(modules=["sm_test_gil"], static_slots={"gil_sleep": 1},
                          queues={"gil_sleep": {"batch_size": 1, "lock_timeout_s": 60.0}},
                          hung_after_beacons=3)
    master.wait_running("gil_sleep", 1)
    log = tmp_path / "gil_sleep.log"
    master.client().put("gil_sleep", json.dumps({"log": str(log)}))
    [[pid, _]] = poll_until(lambda: lines(log, "sleeping"), what="the slot asleep with the GIL")
    master.wait_report(lambda r: r.counters.get(Counter.KILLED_HUNG, 0) == 1
                       and int(pid) not in [s.pid for s in r.slots], what="the silent slot killed")
    assert f"(pid {pid}, queue gil_sleep) hung (no beacon for" in master.log_text()
