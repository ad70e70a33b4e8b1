"""A code reload whose new code takes seconds to import (a model fetched at import): the jobs
running meanwhile keep their locks, the master's loop goes on (the import runs on a thread,
master/background_import.py) but forks nothing until the import ends, and a stop meanwhile
does not wait for it. The manager's side: tests/manager/test_reload_slow_import_managed.py."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from master_procs import StartMaster, poll_until
from reload_app import MODULE, lines, write_app

LOCK_S = 1.0
IMPORT_S = 4.0


def test_a_reload_whose_import_takes_longer_than_the_lock_time_charges_no_running_job(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    app = tmp_path / "app"
    write_app(app, "v1")
    master = start_master(modules=[MODULE], static_slots={"roll": 1}, python_path=[str(app)],
                          queues={"roll": {"lock_timeout_s": LOCK_S, "retry_base_s": 60.0}})
    master.wait_running("roll", 1)
    log = tmp_path / "runs.log"
    client = master.client()
    key = client.put_job("roll", json.dumps({"log": str(log), "sleep_s": IMPORT_S + 2})).key
    poll_until(lambda: lines(log, "start"), what="the job started")
    # The import takes 4 lock times while the job runs.
    write_app(app, "v2", extra=f"time.sleep({IMPORT_S})")
    master.process.send_signal(signal.SIGHUP)
    poll_until(lambda: lines(log, "end"), what="the job ended")
    job = poll_until(lambda: (found := client.job(key)) is not None and found.state != "running" and found,
                     what="the job acknowledged")
    assert (job.state, job.attempts, job.error) == ("done", 1, None), job
    assert [run[4] for run in lines(log, "start")] == ["1"]  # run once, never handed out again
    master.wait_report(lambda r: r.code_generation == 1 and not r.code_reloading, what="the reload rolled")


def test_a_slot_that_dies_during_a_slow_import_is_replaced_once_it_ends(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    app = tmp_path / "app"
    write_app(app, "v1")
    master = start_master(modules=[MODULE], static_slots={"roll": 1}, python_path=[str(app)])
    [slot] = master.wait_running("roll", 1).slots
    write_app(app, "v2", extra=f"time.sleep({IMPORT_S})")
    master.process.send_signal(signal.SIGHUP)
    poll_until(lambda: "importing sm_reload_app beside the loop" in master.log_text(), what="the import began")
    os.kill(slot.pid, signal.SIGKILL)
    # The loop goes on: it reaps the slot and reports it gone while the import runs...
    gone = master.wait_report(lambda r: not r.slots, what="the dead slot reaped")
    assert gone.code_reloading
    # ... and forks its replacement only after the import (half the new code is in sys.modules
    # until then), from the new code once its trial passed.
    report = master.wait_running("roll", 1, timeout_s=IMPORT_S + 30)
    assert "code reload: import ended" in master.log_text()
    log = master.log_text()
    assert log.index("code reload: import ended") < log.rindex("forked slot 0")
    assert report.slots[0].pid != slot.pid


def test_a_stop_during_a_slow_import_does_not_wait_for_it(start_master: StartMaster, tmp_path: Path) -> None:
    app = tmp_path / "app"
    write_app(app, "v1")
    master = start_master(modules=[MODULE], static_slots={"roll": 1}, python_path=[str(app)])
    master.wait_running("roll", 1)
    write_app(app, "v2", extra="time.sleep(60)")
    master.process.send_signal(signal.SIGHUP)
    poll_until(lambda: "importing sm_reload_app beside the loop" in master.log_text(), what="the import began")
    stopped_at = time.monotonic()
    master.process.send_signal(signal.SIGTERM)
    assert master.process.wait(timeout=30) == 0
    assert time.monotonic() - stopped_at < 20
