"""Code reloads and graceful stops on real masters (issue 27, points 1, 3 and 7): the handler
module is a file of the test's own, rewritten on disk between SIGHUPs."""
from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from master_procs import MasterProc, StartMaster, poll_until
from polling import DEADLINE_S
from procs import server_proc
from reload_app import MODULE, lines, write_app

from master.report import HostReport

slotmap_command = server_proc.slotmap_command

QUEUES = {"roll": {"lock_timeout_s": 30.0}}


def start(start_master: StartMaster, tmp_path: Path, slots: int, **settings: object) -> MasterProc:
    app = tmp_path / "app"
    write_app(app, "v1")
    master = start_master(modules=[MODULE], static_slots={"roll": slots}, queues=QUEUES,
                          python_path=[str(app)], **settings)
    master.wait_running("roll", slots)
    return master


def put(master: MasterProc, log: Path, first: int, count: int, sleep_s: float = 0.5) -> list[str]:
    client = master.client()
    return [client.put_job("roll", json.dumps({"log": str(log), "sleep_s": sleep_s}),
                           key=f"job-{n}").key for n in range(first, first + count)]


def ended(log: Path) -> list[list[str]]:
    return lines(log, "end")


def test_a_reload_while_jobs_run_does_every_job_once_on_attempt_1_and_the_next_jobs_run_the_new_code(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    master = start(start_master, tmp_path, 2)
    first = master.report()
    assert first is not None and first.code_version and first.code_generation == 0
    old_pids = {slot.pid for slot in first.slots}
    log = tmp_path / "runs.log"
    keys = put(master, log, 0, 16)
    poll_until(lambda: len(ended(log)) >= 2, what="jobs under way")
    write_app(tmp_path / "app", "v2")
    master.process.send_signal(signal.SIGHUP)
    # Sampled in every report until the roll ends: the queue always has a slot at work.
    serving: list[int] = []

    def rolled(r: HostReport) -> bool:
        serving.append(sum(1 for slot in r.slots if slot.state == "running"))
        return r.code_generation == 1 and not r.code_reloading and len(r.slots) == 2

    report = master.wait_report(rolled, what="the reload rolled")
    assert min(serving) >= 1, serving
    assert report.code_version != first.code_version
    assert not old_pids & {slot.pid for slot in report.slots}
    assert report.code_reload_failure is None
    poll_until(lambda: len(ended(log)) >= 16, timeout_s=DEADLINE_S * 2,
               what=lambda: f"{log.read_text()}\n{master.log_tail()}")
    # Every job ran once, on its first attempt: nothing lost, re-run or charged.
    runs = ended(log)
    assert sorted(run[3] for run in runs) == sorted(keys)
    assert {run[4] for run in runs} == {"1"}
    assert sorted(run[3] for run in lines(log, "start")) == sorted(keys)
    # The module changed on disk is what the next jobs run, in the new slots.
    more = put(master, log, 16, 4, sleep_s=0.01)
    poll_until(lambda: len(ended(log)) >= 20, what=lambda: master.log_tail())
    new = [run for run in ended(log) if run[3] in more]
    assert {run[1] for run in new} == {"v2"}
    assert {int(run[2]) for run in new} <= {slot.pid for slot in report.slots}
    client = master.client()
    assert client.total("roll").running == 0
    assert "given back to the head of the queue (LATER ... FRONT" in master.log_text()


def test_new_code_that_fails_to_import_or_in_setup_leaves_the_old_generation_serving(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    master = start(start_master, tmp_path, 1)
    first = master.report()
    assert first is not None
    pid = first.slots[0].pid
    app = tmp_path / "app"
    # A module that exits at import must not end the master with it.
    (app / f"{MODULE}.py").write_text("import sys\nsys.exit(3)\n")
    master.process.send_signal(signal.SIGHUP)
    refused = master.wait_report(lambda r: "SystemExit" in (r.code_reload_failure or ""),
                                 what="the exiting import refused")
    (app / f"{MODULE}.py").write_text("def broken(:\n")
    master.process.send_signal(signal.SIGHUP)
    refused = master.wait_report(lambda r: "SyntaxError" in (r.code_reload_failure or ""),
                                 what="import refused")
    assert "failed to import" in (refused.code_reload_failure or "")
    assert refused.code_version == first.code_version and refused.code_generation == 0

    write_app(app, "v2", setup_fails=True)
    master.process.send_signal(signal.SIGHUP)
    refused = master.wait_report(lambda r: "setup()" in (r.code_reload_failure or ""),
                                 what="setup refused")
    assert refused.code_generation == 0
    assert [slot.pid for slot in refused.slots] == [pid]
    # The old generation still serves, with the old code.
    log = tmp_path / "runs.log"
    put(master, log, 0, 2, sleep_s=0.01)
    poll_until(lambda: len(ended(log)) == 2, what=lambda: master.log_tail())
    assert {(run[1], int(run[2])) for run in ended(log)} == {("v1", pid)}
    assert "setup refused by the new code" in master.log_text()

    # `slotmap reload` does the same and waits for the answer: refused (exit 1), then done.
    refused_again = reload_command(master)
    assert refused_again.returncode == 1 and "setup() failed" in refused_again.stderr
    write_app(app, "v3")
    done = reload_command(master)
    assert done.returncode == 0 and "generation 1" in done.stdout, done
    fixed = master.wait_report(lambda r: r.code_generation == 1 and not r.code_reloading
                               and len(r.slots) == 1 and r.slots[0].state == "running",
                               what="the fixed code rolled")
    assert fixed.code_reload_failure is None and fixed.slots[0].pid != pid


def reload_command(master: MasterProc) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*slotmap_command(), "reload", "--report-file", str(master.report_path),
                           "--timeout-s", str(DEADLINE_S)],
                          capture_output=True, text=True, timeout=DEADLINE_S + 10)


def test_sigterm_finishes_the_running_job_and_gives_the_rest_of_the_batch_back_uncharged(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    master = start(start_master, tmp_path, 1, stop_timeout_s=20.0)
    log = tmp_path / "runs.log"
    keys = put(master, log, 0, 5, sleep_s=1.0)
    poll_until(lambda: len(lines(log, "start")) == 1, what="the first job under way")
    master.process.send_signal(signal.SIGTERM)
    assert master.process.wait(timeout=DEADLINE_S) == 0
    # The running job finished, and only it ran: the slot stopped after it.
    assert [run[3] for run in ended(log)] == [keys[0]]
    assert len(lines(log, "start")) == 1
    client = master.client()
    finished = client.job(keys[0])  # kept once finished (issue 26)
    assert finished is not None and finished.state == "done"
    for key in keys[1:]:
        info = client.job(key)
        assert info is not None and info.state == "ready" and info.attempts == 0, info
    assert client.total("roll").running == 0


def test_a_job_still_running_at_stop_timeout_is_killed_and_given_back_uncharged(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    master = start(start_master, tmp_path, 1, stop_timeout_s=0.5)
    log = tmp_path / "runs.log"
    [key] = put(master, log, 0, 1, sleep_s=60.0)
    poll_until(lambda: len(lines(log, "start")) == 1, what="the long job under way")
    master.process.send_signal(signal.SIGTERM)
    assert master.process.wait(timeout=DEADLINE_S) == 0
    assert ended(log) == []
    assert "missed its stop deadline" in master.log_text()
    info = master.client().job(key)
    # Back in the queue, its hand-out taken back: it runs again from its start on attempt 1.
    assert info is not None and info.state == "ready" and info.attempts == 0, info


def test_slotmap_reload_during_a_roll_answers_when_its_own_code_has_rolled(
    start_master: StartMaster, tmp_path: Path,
) -> None:
    """Asked while an earlier reload still rolls, `slotmap reload` took the end of that roll for
    its answer: 'every slot runs version ...' while a slot still ran a job on the code before."""
    master = start(start_master, tmp_path, 1)
    log = tmp_path / "runs.log"
    put(master, log, 0, 1, sleep_s=0.5)
    put(master, log, 1, 1, sleep_s=2.5)
    poll_until(lambda: len(lines(log, "start")) >= 1, what=lambda: master.log_tail())
    write_app(tmp_path / "app", "v2")
    master.process.send_signal(signal.SIGHUP)
    master.wait_report(lambda r: r.code_generation == 1 and r.code_reloading, what="the v2 roll under way")
    write_app(tmp_path / "app", "v3")
    # The v2 slot (forked as the v2 roll starts) runs job-1 past the v3 roll's start: the
    # answer comes when it has run it to its end and only v3 serves.
    done = reload_command(master)
    assert done.returncode == 0 and "(generation 2)" in done.stdout, done
    assert [(run[1], run[3]) for run in ended(log)] == [("v1", "job-0"), ("v2", "job-1")]
    report = master.report()
    assert report is not None and report.code_generation == 2 and not report.code_reloading, report
