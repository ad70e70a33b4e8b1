"""A code reload whose new code takes seconds to import (a model fetched at import): the jobs
running meanwhile keep their locks."""
from __future__ import annotations

import json
import signal
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
    # The import holds the master's loop for 4 lock times while the job runs.
    write_app(app, "v2", extra=f"time.sleep({IMPORT_S})")
    master.process.send_signal(signal.SIGHUP)
    poll_until(lambda: lines(log, "end"), what="the job ended")
    job = poll_until(lambda: (found := client.job(key)) is not None and found.state != "running" and found,
                     what="the job acknowledged")
    assert (job.state, job.attempts, job.error) == ("done", 1, None), job
    assert [run[4] for run in lines(log, "start")] == ["1"]  # run once, never handed out again
    master.wait_report(lambda r: r.code_generation == 1 and not r.code_reloading, what="the reload rolled")
