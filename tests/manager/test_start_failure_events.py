"""handler_start_failed events from the masters' reports (pure): once per distinct error, and
the master's record they come from (master/start_failures.py)."""
from __future__ import annotations

from typing import Any

from manager.events.start_failures import StartFailureEvents
from manager.storage.samples import read_start_failures, stored_start_failures
from manager.storage.store import EventKind
from master.report import HostReport
from master.start_failures import MAX_REPORTED, StartFailure, StartFailures
from slot.setup_notes import SetupError

DOWN = SetupError(handler="app.Thumbs", error="ConnectionRefusedError: db down", traceback="  raise X\nX")
AUTH = SetupError(handler="app.Thumbs", error="PermissionError: bad password", traceback="...")


def report(failures: list[StartFailure], **fields: Any) -> HostReport:
    return HostReport(host="alpha", master_pid=10, sent_at_unix=1.0, capacity=4, capacity_by_memory=4,
                      capacity_by_load=4, max_slots=4, avg_slot_bytes=1, master_pss_bytes=1,
                      slots_pss_bytes=0, slots_measured=0, mem_available_bytes=1, load_avg_1m=0.0,
                      cpus=2, slots=[], start_failures=failures, **fields)


def test_the_same_error_again_is_counted_another_starts_over() -> None:
    record = StartFailures()
    record.setup_failed("thumbs", DOWN, 100.0)
    again = record.setup_failed("thumbs", DOWN, 101.0)
    assert (again.count, again.first_at_unix, again.last_at_unix) == (2, 100.0, 101.0)
    other = record.setup_failed("thumbs", AUTH, 102.0)
    assert (other.count, other.first_at_unix, other.source) == (1, 102.0, "setup() of app.Thumbs")
    record.started("thumbs")
    assert record.reported({}) == []


def test_a_report_lists_the_newest_few_with_their_back_off() -> None:
    record = StartFailures()
    for n in range(MAX_REPORTED + 5):
        record.setup_failed(f"q{n}", DOWN, 100.0 + n)
    listed = record.reported({"q20": 4.0, f"q{MAX_REPORTED + 4}": 8.0})
    assert len(listed) == MAX_REPORTED and listed[0].queue == f"q{MAX_REPORTED + 4}"
    assert listed[0].retry_in_s == 8.0
    assert len(report(listed).encode()) < 8 * 1024


def test_one_event_per_distinct_error_none_per_attempt() -> None:
    record, events = StartFailures(), StartFailureEvents()
    record.setup_failed("thumbs", DOWN, 100.0)
    [told] = events.on_report(report(record.reported({"thumbs": 0.5})))
    assert told.kind is EventKind.HANDLER_START_FAILED and told.queue == "thumbs"
    assert told.message.startswith("thumbs: setup() of app.Thumbs failed on alpha: ConnectionRefusedError: db down")
    assert told.detail is not None and told.detail["traceback"] == DOWN.traceback
    for at in range(101, 110):  # forked again after each back-off, failing the same way
        record.setup_failed("thumbs", DOWN, float(at))
        assert events.on_report(report(record.reported({"thumbs": 2.0}))) == []
    record.setup_failed("thumbs", AUTH, 111.0)
    [changed] = events.on_report(report(record.reported({})))
    assert "PermissionError: bad password" in changed.message
    record.started("thumbs")
    assert events.on_report(report(record.reported({}))) == []
    record.setup_failed("thumbs", AUTH, 200.0)  # back after its slots had started: told again
    assert len(events.on_report(report(record.reported({})))) == 1


def test_an_import_failure_is_told_and_stored_short() -> None:
    record = StartFailures()
    record.imports_failed({"module app.x": "SyntaxError: invalid syntax"}, {"module app.x": "tb"}, 50.0)
    failures = record.reported({})
    [told] = StartFailureEvents().on_report(report(failures))
    assert told.message.startswith("alpha: handler module app.x failed to import: SyntaxError")
    stored = stored_start_failures(failures, at_unix=60.0)
    assert stored is not None and "tb" not in stored
    [row] = read_start_failures(stored)
    assert (row["kind"], row["queue"], row["retry_at_unix"]) == ("import", None, None)
    assert read_start_failures("not json") == [] and read_start_failures(None) == []


def test_old_managers_read_a_report_without_start_failures() -> None:
    assert b"start_failures" not in report([]).encode()


def test_a_stored_sample_keeps_what_fits_its_column() -> None:
    record = StartFailures()
    long = SetupError(handler="h" * 256, error="E" * 500, traceback="t" * 1200)
    for n in range(MAX_REPORTED):
        record.setup_failed(f"q{n}", long, 100.0 + n)
    stored = stored_start_failures(record.reported({}), at_unix=200.0)
    assert stored is not None and len(stored) <= 2000
    assert 1 <= len(read_start_failures(stored)) < MAX_REPORTED
