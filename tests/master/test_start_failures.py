"""Why a queue's slots do not come up, in the master's report (start_failures): a setup()
error with its traceback's tail, when and how many times, and the back-off before the next
fork; an import error likewise. Before, both were only in the master's log."""
from __future__ import annotations

from pathlib import Path

from master_procs import StartMaster

from master.start_failures import MAX_REPORTED

FLAKY = '''
import os
from slot.handler import Handler, handler

@handler("flaky")
class Flaky(Handler):
    def setup(self):
        if os.path.exists({flag!r}):
            raise TimeoutError("the model server did not answer")

    def handle(self, jobs):
        pass
'''


def test_a_failing_setup_is_reported_with_its_traceback_count_and_back_off(start_master: StartMaster) -> None:
    master = start_master(modules=["sm_test_behaviours", "sm_test_broken_import"],
                          static_slots={"stubborn": 1, "slow": 1})
    # The back-off doubles (0.5 s, 1 s, 2 s ...): after the third failure the next fork waits
    # 2 s, which a report shows as its time left (a report made just as it ran out says 0:
    # seen on a loaded box, so the one waited for is one that shows some left).
    report = master.wait_report(
        lambda r: any(f.queue == "stubborn" and f.count >= 3 and f.retry_in_s for f in r.start_failures),
        what="three failed setups of stubborn reported with the back-off left")
    [setup] = [f for f in report.start_failures if f.kind == "setup"]
    assert (setup.queue, setup.source, setup.error) == (
        "stubborn", "setup() of sm_test_behaviours.Stubborn",
        "ConnectionRefusedError: the database of stubborn is down")
    assert 'raise ConnectionRefusedError("the database of stubborn is down")' in setup.traceback
    assert setup.first_at_unix < setup.last_at_unix
    assert setup.retry_in_s is not None and 0 < setup.retry_in_s <= 60.0
    [imported] = [f for f in report.start_failures if f.kind == "import"]
    assert imported.source == "module sm_test_broken_import" and imported.queue is None
    assert imported.error == "RuntimeError: sm_test_broken_import cannot reach its cache at import time"
    assert "sm_test_broken_import.py" in imported.traceback
    assert len(report.encode()) < 64 * 1024 and len(report.start_failures) <= MAX_REPORTED


def test_the_failure_goes_once_a_slot_of_its_queue_starts(start_master: StartMaster, tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    flag = tmp_path / "model-server-down"
    flag.touch()
    (app / "sm_flaky_setup.py").write_text(FLAKY.format(flag=str(flag)))
    master = start_master(modules=["sm_flaky_setup"], static_slots={"flaky": 1}, python_path=[str(app)])
    master.wait_report(lambda r: any(f.queue == "flaky" and f.count >= 2 for f in r.start_failures),
                       what="two failed setups of flaky")
    flag.unlink()
    report = master.wait_running("flaky", 1)
    master.wait_report(lambda r: not r.start_failures, what="the failure cleared")
    assert report.slots
