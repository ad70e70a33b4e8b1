"""Real slots failing in real ways: hangs, kill -9 mid-batch, broken imports, failing setup."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from master_procs import MasterProc, ServerFor, StartMaster, poll_until
from polling import DEADLINE_S

from master.lifecycle import Counter

LOCK_S = 1.0
# The killed slot's jobs come back after their backoff (the master fails them at once).
FAST_RETRY: dict[str, Any] = {"retry_base_s": 0.2, "retry_max_s": 1.0}


def put_numbered(master: MasterProc, queue: str, count: int, tmp_path: Path) -> Path:
    log = tmp_path / f"{queue}.log"
    master.client().put_many(queue, [
        json.dumps({"log": str(log), "marker": str(tmp_path / f"{queue}.marker"), "n": n})
        for n in range(count)
    ])
    return log


def lines_starting(log: Path, word: str) -> list[str]:
    if not log.exists():
        return []
    return [line.split(" ", 1)[1] for line in log.read_text().splitlines() if line.startswith(word + " ")]


def all_done(log: Path, count: int) -> bool:
    return sorted({int(n) for n in lines_starting(log, "done")}) == list(range(count))


def test_a_slot_stuck_in_python_past_its_batch_timeout_is_killed_and_its_job_comes_back(
    queue_server_for: ServerFor, start_master: StartMaster, tmp_path: Path
) -> None:
    queues = {"sleepy": {"lock_timeout_s": LOCK_S, "batch_size": 1, **FAST_RETRY}}
    master = start_master(modules=["sm_test_behaviours"], static_slots={"sleepy": 2},
                          queues=queues, server=queue_server_for(queues))
    master.wait_running("sleepy", 2)
    log = put_numbered(master, "sleepy", 3, tmp_path)
    hung_pid = int(poll_until(lambda: lines_starting(log, "hang"), what="a slot hanging")[0])
    master.wait_report(lambda r: r.counters.get(Counter.KILLED_HUNG, 0) == 1
                       and hung_pid not in [s.pid for s in r.slots], what="hung slot killed and reaped")
    poll_until(lambda: all_done(log, 3), what="the hung job done by another slot")
    text = master.log_text()
    assert "past its handler's batch_timeout_s 1 s" in text
    # Its job was failed at once with the reason, not left to the lock time.
    assert (f"pid {hung_pid}) killed by SIGKILL: the master killed it, hung (batch running"
            in text)
    assert "holding 1 jobs of sleepy: 0 outcomes honoured, 0 given back uncharged, 1 charged" in text
    master.wait_running("sleepy", 2)


def test_a_frozen_slot_stops_beaconing_and_is_killed_after_the_missed_beacons(
    start_master: StartMaster, tmp_path: Path
) -> None:
    # Lock time far beyond the test: only the silence of its beacons can expose this slot.
    master = start_master(modules=["sm_test_behaviours"], static_slots={"frozen": 1},
                          queues={"frozen": {"lock_timeout_s": 60.0, "batch_size": 1}},
                          hung_after_beacons=3)
    master.wait_running("frozen", 1)
    log = put_numbered(master, "frozen", 1, tmp_path)
    frozen_pid = int(poll_until(lambda: lines_starting(log, "freeze"), what="a slot freezing")[0])
    stopped_at = time.monotonic()
    master.wait_report(lambda r: r.counters.get(Counter.KILLED_HUNG, 0) == 1, what="frozen slot killed")
    # 3 missed beacons of 100 ms and the report's own 100 ms period take well under a second;
    # the bound leaves a busy shared machine its slack and stays far below the 60 s lock time.
    assert time.monotonic() - stopped_at < 20.0
    assert "no beacon for" in master.log_text()
    master.wait_report(lambda r: frozen_pid not in [s.pid for s in r.slots]
                       and sum(1 for s in r.slots if s.state == "running") == 1,
                       what="frozen slot reaped and replaced")


def test_kill_9_of_a_slot_mid_batch_loses_no_job(
    queue_server_for: ServerFor, start_master: StartMaster, tmp_path: Path
) -> None:
    queues = {"slow": {"lock_timeout_s": LOCK_S, **FAST_RETRY}}
    master = start_master(modules=["sm_test_behaviours"], static_slots={"slow": 2},
                          queues=queues, server=queue_server_for(queues))
    master.wait_running("slow", 2)
    log = put_numbered(master, "slow", 100, tmp_path)
    victim = int(poll_until(lambda: lines_starting(log, "start"), what="a batch started")[0].split()[0])
    os.kill(victim, signal.SIGKILL)
    report = master.wait_report(
        lambda r: r.counters.get(Counter.CRASHED, 0) == 1
        and sum(1 for s in r.slots if s.state == "running") == 2,
        what="the killed slot replaced",
    )
    assert victim not in [s.pid for s in report.slots]
    poll_until(lambda: all_done(log, 100), timeout_s=DEADLINE_S,
               what=lambda: f"all 100 jobs done; missing {set(range(100)) - {int(n) for n in lines_starting(log, 'done')}}")
    client = master.client()
    poll_until(lambda: client.total("slow").jobs == 0 and client.total("slow").running == 0,
               what="the slow queue empty")
    assert "killed by SIGKILL: died unexpectedly" in master.log_text()


def test_a_handler_module_that_raises_on_import_is_reported_and_the_rest_runs(
    start_master: StartMaster,
) -> None:
    master = start_master(modules=["sm_test_broken_import", "sm_test_behaviours"],
                          static_slots={"broken": 2, "slow": 1})
    report = master.wait_running("slow", 1)
    assert report.handler_failures == {
        "module sm_test_broken_import":
            "RuntimeError: sm_test_broken_import cannot reach its cache at import time"
    }
    assert report.unhandled_queues == ["broken"]
    assert [s.queue for s in report.slots] == ["slow"]
    text = master.log_text()
    assert "handler module sm_test_broken_import failed to import" in text
    assert "Traceback" in text
    assert "queue broken is in the slot map but no handler serves it" in text
    assert text.count("forked slot") == 1


def test_a_handler_module_that_calls_sys_exit_on_import_is_reported_and_the_rest_runs(
    start_master: StartMaster,
) -> None:
    master = start_master(modules=["sm_test_exiting_import", "sm_test_behaviours"],
                          static_slots={"exiting": 1, "slow": 1})
    report = master.wait_running("slow", 1)
    assert report.handler_failures == {
        "module sm_test_exiting_import": "SystemExit: 2 (sys.exit() at import: a command line parsed there?)"
    }
    assert report.unhandled_queues == ["exiting"]
    text = master.log_text()
    assert "handler module sm_test_exiting_import failed to import" in text
    assert "unrecognized arguments" in text  # argparse's own words, kept in the log


def test_a_handler_whose_setup_fails_is_restarted_with_growing_pauses(start_master: StartMaster) -> None:
    master = start_master(modules=["sm_test_behaviours"], static_slots={"stubborn": 1, "slow": 1})
    started = time.monotonic()
    report = master.wait_report(lambda r: r.counters.get(Counter.BOOT_FAILED, 0) >= 3,
                                what="three failed starts", timeout_s=DEADLINE_S)
    # Without backoff 3 forks take a few ms; with it 0.5 s, then 1 s, pass between them.
    assert time.monotonic() - started >= 1.5
    assert report.counters.get(Counter.BOOT_FAILED, 0) <= 4
    text = master.log_text()
    assert "ConnectionRefusedError: the database of stubborn is down" in text
    assert "exit 4 (setup_failed)" in text
    assert "queue stubborn: slot restarts wait 2.0 s (3 failed starts in a row)" in text
    # The healthy queue kept its one slot all along.
    assert sum(1 for s in report.slots if s.queue == "slow" and s.state == "running") == 1
