"""Where a handler's print() goes: the master's output, line by line, even when buffered."""
from __future__ import annotations

from master_procs import StartMaster, poll_until


def test_a_handlers_print_reaches_the_masters_output_at_once_without_pythonunbuffered(
    start_master: StartMaster,
) -> None:
    # Output to a file without PYTHONUNBUFFERED, as a systemd unit's to the journal.
    master = start_master(modules=["sm_test_output"], static_slots={"printing": 1}, unbuffered=False)
    report = master.wait_running("printing", 1)
    master.client().put_job("printing", b"{}", key="print-1")
    poll_until(lambda: "printed by the handler for print-1" in master.log_text(),
               what="the handler's line in the master's output")
    # The slot lives on: the line did not wait for its exit.
    assert [s.pid for s in master.wait_running("printing", 1).slots] == [report.slots[0].pid]
