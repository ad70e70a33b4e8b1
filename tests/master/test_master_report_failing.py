"""A master whose report file cannot be written goes on serving, says so once, and reports
again once it can (config/periodic.py). Before the audit branch the first failed write
ended the master's loop: the master exited and its slots followed."""
from __future__ import annotations

from master_procs import StartMaster, poll_until

from master.report import HostReport


def test_a_report_that_cannot_be_written_is_logged_once_and_written_again_later(
    start_master: StartMaster,
) -> None:
    master = start_master(modules=["sm_test_behaviours"], static_slots={"whoami": 1})
    before = master.wait_running("whoami", 1)
    # A directory where the report's temporary file goes: every write fails, for real.
    blocker = master.report_path.with_suffix(".tmp")
    blocker.mkdir()
    poll_until(lambda: "writing the report file" in master.log_text(),
               what=lambda: f"the failure logged\n{master.log_tail()}")
    master.assert_alive()
    # The slots are served meanwhile.
    answer = master.client().call("whoami", b"?", output_queue="whoami_reply",
                                  expire_s=0, then="done", timeout_s=10.0)
    assert answer.data.decode().endswith(" whoami")
    master.assert_alive()
    blocker.rmdir()

    def fresh(report: HostReport) -> bool:
        return report.sent_at_unix > before.sent_at_unix and report.master_pid == before.master_pid

    master.wait_report(fresh, what="a report written again")
    poll_until(lambda: "works again after" in master.log_text(),
               what=lambda: f"the recovery logged\n{master.log_tail()}")
    log = master.log_text()
    # One traceback for the whole outage (a report every 0.1 s here), not one per failure.
    assert log.count("failed (IsADirectoryError: ") == 1 and log.count("Traceback") == 1, log
    assert log.count("writing the report file") == 2, log  # failed, then works again
