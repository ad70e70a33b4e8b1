"""A real master over its load limit: it keeps min_slots_under_load slots serving and says so."""
from __future__ import annotations

from master_procs import StartMaster
from polling import DEADLINE_S

from master.report import HostReport


def test_a_master_far_over_its_load_limit_keeps_the_floor_of_slots_and_reports_the_cap(
    start_master: StartMaster,
) -> None:
    # A limit no real load stays under: any running process (the master's own slots, the
    # test) keeps the 1-minute load average above a millionth per CPU.
    master = start_master(modules=["sm_test_behaviours"], static_slots={"whoami": 4},
                          max_load_per_cpu=1e-6, min_slots_under_load=2)

    def capped(report: HostReport) -> bool:
        running = [s for s in report.slots if s.queue == "whoami" and s.state == "running"]
        return report.capacity == 2 and len(running) == 2 and report.load_cap() is not None

    report = master.wait_report(capped, what="2 running slots, capped by load", timeout_s=DEADLINE_S)
    assert report.capacity_by_load == 2 and report.capacity_by_memory > 2
    notice = report.load_cap()
    assert notice is not None and notice.startswith("capped by load: 2 of 64 slots (load ")
    assert f"on {report.cpus} CPUs" in notice
    # The capped host still serves its queue.
    answer = master.client().call("whoami", b"?", output_queue="whoami_reply",
                                  expire_s=0, then="done", timeout_s=10.0)
    assert answer.data.decode().endswith(" whoami")
    # Said once, not every second of the cap.
    assert master.log_text().count("capped by load:") == 1, master.log_tail()
