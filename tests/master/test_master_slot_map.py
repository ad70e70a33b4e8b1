"""The slot map on real processes: retarget without a fork, graceful stop, SIGKILL at the deadline."""
from __future__ import annotations

import json
import signal
from functools import partial
from pathlib import Path

import psutil
from master_procs import StartMaster, poll_until
from polling import DEADLINE_S

from queue_server.client import QueueClient


def test_a_changed_static_map_retargets_a_running_slot_without_a_new_fork(
    start_master: StartMaster,
) -> None:
    master = start_master(modules=["sm_test_behaviours"], static_slots={"whoami": 2})
    before = {s.slot_id: s.pid for s in master.wait_running("whoami", 2).slots}
    master.reload({"whoami": 1, "whoami_too": 1})
    report = master.wait_running("whoami_too", 1)
    assert {s.slot_id: s.pid for s in report.slots} == before
    moved = next(s for s in report.slots if s.queue == "whoami_too")
    answer = master.client().call("whoami_too", b"?", output_queue="whoami_too_reply",
                                  expire_s=0, then="done", timeout_s=DEADLINE_S)
    assert answer.data.decode() == f"{moved.pid} whoami_too"
    assert "retargeting slot" in master.log_text()
    assert master.log_text().count("forked slot") == 2


def test_sigterm_lets_busy_slots_finish_their_batch_then_the_master_exits(
    start_master: StartMaster, tmp_path: Path
) -> None:
    master = start_master(modules=["sm_test_behaviours"], static_slots={"slow": 2},
                          queues={"slow": {"lock_timeout_s": 30.0}})
    master.wait_running("slow", 2)
    log = tmp_path / "slow.log"
    master.client().put_many("slow", [json.dumps({"log": str(log), "n": n}) for n in range(40)])
    poll_until(lambda: log.exists() and "start" in log.read_text(), what="a batch started")
    master.process.send_signal(signal.SIGTERM)
    assert master.process.wait(timeout=DEADLINE_S) == 0
    lines = log.read_text().splitlines()
    started = sum(int(line.split()[2]) for line in lines if line.startswith("start"))
    done = sum(1 for line in lines if line.startswith("done"))
    # Every batch that started was finished and acknowledged, and no new one began.
    assert done == started > 0
    total = master.client().total("slow")
    assert total.running == 0 and total.jobs == 40 - done
    assert "master stopped: all slots exited" in master.log_text()


def test_a_slot_that_ignores_sigterm_is_killed_at_the_stop_deadline(
    start_master: StartMaster, tmp_path: Path
) -> None:
    master = start_master(modules=["sm_test_behaviours"], static_slots={"deaf": 1},
                          queues={"deaf": {"lock_timeout_s": 60.0}}, stop_timeout_s=1.0)
    master.wait_running("deaf", 1)
    log = tmp_path / "deaf.log"
    master.client().put("deaf", json.dumps({"log": str(log), "marker": str(tmp_path / "m"), "n": 0}))
    poll_until(lambda: log.exists() and "hang" in log.read_text(), what="the slot hanging")
    master.process.send_signal(signal.SIGTERM)
    assert master.process.wait(timeout=DEADLINE_S) == 0
    assert "missed its stop deadline: SIGKILL" in master.log_text()


def test_slots_of_a_master_killed_with_sigkill_exit_by_themselves(start_master: StartMaster) -> None:
    master = start_master(modules=["sm_test_behaviours"], static_slots={"slow": 2})
    pids = [s.pid for s in master.wait_running("slow", 2).slots]
    master.process.kill()
    master.process.wait(timeout=DEADLINE_S)

    def gone(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    # Each slot sees its parent change at its next beacon and stops like on SIGTERM.
    poll_until(lambda: all(gone(pid) for pid in pids), timeout_s=DEADLINE_S, what="orphaned slots exited")


def test_a_job_put_as_blocked_slots_are_retargeted_or_stopped_is_run_or_stays_ready(
    start_master: StartMaster,
) -> None:
    """Slots blocked in GETB are woken through their wake fd (no exception thrown into them):
    a job that arrives at that moment is answered or still ready, never left running until
    its 60 s lock time."""
    queues = {name: {"lock_timeout_s": 60.0} for name in ("whoami", "whoami_too")}
    master = start_master(modules=["sm_test_behaviours"], static_slots={"whoami": 2}, queues=queues)
    master.wait_running("whoami", 2)
    client = master.client()
    maps = [{"whoami_too": 2}, {"whoami": 2}] * 3
    for round_, static_slots in enumerate(maps):
        old = "whoami" if round_ % 2 == 0 else "whoami_too"
        client.put(old, b"?", item=f"round_{round_}")
        master.reload(static_slots)
        master.wait_running(next(iter(static_slots)), 2)
        poll_until(partial(_settled, client, old), timeout_s=DEADLINE_S,
                   what=lambda: f"{client.stats()}")
        client.get(old, count=10, expire_s=0, then="done")  # so each round starts empty
        client.get(old + "_reply", count=10, expire_s=0, then="done")
    client.put("whoami", b"?")
    master.process.send_signal(signal.SIGTERM)
    assert master.process.wait(timeout=DEADLINE_S) == 0
    assert client.total("whoami").running == 0


def _settled(client: QueueClient, queue: str) -> bool:
    """The job of the round is answered (its reply queued) or ready; none running."""
    total, replies = client.total(queue), client.total(queue + "_reply")
    return total.running == 0 and total.jobs + replies.jobs == 1
