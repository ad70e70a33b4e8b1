"""Cancel end to end (issue 26 point 5): a real queue server, master and slots. A running
job cancelled with `slotmap cancel` has its slot stopped (SIGKILL, not counted as a crash),
ends dead "cancelled by cli", and its batch-mates are done later, uncharged; a waiting job
cancelled is removed and never runs (handlers in handlers/sm_test_cancel.py)."""
from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from job_runs import JobCluster, dead_job, done_numbers, oks_but, runs
from master_procs import poll_until

from master.lease_keeper import CANCEL_POLL_S
from tests.queue_server.server_proc import REPO_ROOT, slotmap_command

MODULES = ["sm_test_cancel"]
SETTINGS: dict[str, Any] = {"batch_size": 4, "max_attempts": 3, "lock_timeout_s": 600.0}
# Within one poll of the keeper, a tick, the kill and the reap; the rest is a loaded machine's.
STOPPED_WITHIN_S = 10.0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie the master has not reaped yet is dead for this purpose.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def slotmap_cancel(server: str, queue: str, key: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([*slotmap_command(), "cancel", queue, key, "--server", server],
                          capture_output=True, text=True, timeout=30, env=env, check=False)


def test_a_cancelled_running_job_stops_its_slot_and_its_batch_mates_are_done_later(
    job_cluster: JobCluster
) -> None:
    queue = "cancel_in_order"
    log = job_cluster.log
    # The first batch is jobs 0-3 (job 1 blocks); jobs 4 and 5 wait behind it.
    master, keys = job_cluster.start(queue, 1, SETTINGS, oks_but(6, {1: "block"}))
    [blocked] = poll_until(lambda: runs(log, "start", n=1), timeout_s=60.0,
                           what=lambda: f"job 1 running\n{master.log_tail()}")
    assert pid_alive(blocked.pid)

    waiting = slotmap_cancel(master.server, queue, keys[5])
    assert (waiting.returncode, waiting.stdout) == (0, f"{keys[5]}: removed\n"), waiting.stderr

    running = slotmap_cancel(master.server, queue, keys[1])
    cancelled_at = time.monotonic()  # the CLI answered: the cancel is taken
    assert (running.returncode, running.stdout) == (0, f"{keys[1]}: cancelled\n"), running.stderr
    poll_until(lambda: not pid_alive(blocked.pid), timeout_s=STOPPED_WITHIN_S,
               what=lambda: f"slot pid {blocked.pid} gone\n{master.log_tail()}")
    stopped_s = time.monotonic() - cancelled_at
    print(f"slot stopped {stopped_s:.3f} s after the cancel (poll interval {CANCEL_POLL_S} s)")

    dead = dead_job(master, keys[1], timeout_s=10.0)
    assert dead.error == "cancelled by cli"
    # Its batch-mates never started (2, 3) and the job waiting behind (4) run on a new slot.
    poll_until(lambda: done_numbers(log) == {0, 2, 3, 4}, timeout_s=60.0,
               what=lambda: f"jobs 0, 2, 3, 4 done (now {done_numbers(log)})\n{master.log_tail()}")
    starts = runs(log, "start")
    for n in (0, 2, 3, 4):  # each ran once, on its first attempt: nothing charged
        assert [run.attempt for run in starts if run.n == n] == [1], (n, starts)
    assert [run.n for run in starts if run.n in (1, 5)] == [1]  # the cancelled ones ran no more
    assert {run.pid for run in starts if run.n in (2, 3)} != {blocked.pid}
    client = master.client()
    assert client.job(keys[5]) is None
    stats = client.stats(queue)[queue]
    assert (stats.dead, stats.ready, stats.running) == (1, 0, 0), stats
    # No crash on record, no restart backoff: an operator's cancel is no crash.
    report = master.wait_report(lambda r: any(s.queue == queue for s in r.slots), what="a new slot")
    assert not report.crash_counts.get(queue) and not report.crashes, report.crashes
    text = master.log_text()
    assert f"its job {keys[1]} was cancelled by cli: SIGKILL" in text
    assert "died unexpectedly" not in text and "failed starts" not in text
