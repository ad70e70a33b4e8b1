"""slot_crashed events from the masters' reports: each crash once, a storm folded."""
from __future__ import annotations

from typing import Any

from manager.events.crash_events import FOLD_S, CrashEvents
from manager.storage.store import EventKind
from master.crashes import CrashLog
from master.report import HostReport

STARTED = 1000.0


def report(log: CrashLog, *, host: str = "h1", master_pid: int = 10) -> HostReport:
    return HostReport(
        host=host, master_pid=master_pid, sent_at_unix=STARTED, capacity=2, capacity_by_memory=2,
        capacity_by_load=2, max_slots=2, avg_slot_bytes=0, master_pss_bytes=0, slots_pss_bytes=0,
        slots_measured=0, mem_available_bytes=0, load_avg_1m=0.0, cpus=2, slots=[],
        crashes=list(log.recent), crash_counts=log.counts,
    )


def crash(log: CrashLog, **extra: Any) -> None:
    fields: dict[str, Any] = {"at_unix": STARTED + 1, "queue": "q", "slot_id": 1, "pid": 100 + log.seq,
                              "exit_code": 7, "signal": None, "cause": "exit_7", **extra}
    log.add(**fields)


def test_one_crash_is_one_event_naming_the_charged_job_and_a_repeated_report_adds_nothing() -> None:
    events = CrashEvents(started_unix=STARTED)
    log = CrashLog()
    crash(log, key="job-4", charged=1)
    [event] = events.on_report(report(log), now=0.0)
    assert event.kind is EventKind.SLOT_CRASHED and (event.queue, event.host) == ("q", "h1")
    assert event.message == "q: slot 1 (pid 100) on h1 exit 7; job job-4 charged"
    assert event.detail is not None and event.detail["causes"] == {"exit_7": 1}
    assert events.on_report(report(log), now=FOLD_S * 2) == []


def test_a_storm_is_folded_into_one_event_per_host_and_queue_every_fold_period() -> None:
    events = CrashEvents(started_unix=STARTED)
    log = CrashLog()
    crash(log)
    assert len(events.on_report(report(log), now=0.0)) == 1
    for second in range(1, 10):
        for _ in range(5):
            crash(log, signal=9, exit_code=None, cause="SIGKILL") if second == 5 else crash(log)
        assert events.on_report(report(log), now=float(second)) == []
    [folded] = events.on_report(report(log), now=FOLD_S)
    assert folded.detail is not None and folded.detail["count"] == 45
    assert folded.detail["causes"] == {"exit_7": 40, "SIGKILL": 5}
    assert folded.message == "q: 45 slot crashes on h1 (exit_7 x40, SIGKILL x5)"


def test_crashes_from_before_the_manager_started_and_of_a_new_master_pid() -> None:
    events = CrashEvents(started_unix=STARTED)
    log = CrashLog()
    crash(log, at_unix=STARTED - 5)
    assert events.on_report(report(log), now=0.0) == []
    restarted = CrashLog()  # a new master counts from 1 again
    crash(restarted)
    assert len(events.on_report(report(restarted, master_pid=11), now=1.0)) == 1


def test_a_crash_record_out_of_bounds_refuses_the_report() -> None:
    import pytest

    from master.report import ReportError

    log = CrashLog()
    crash(log)
    sound = report(log).encode()
    assert HostReport.decode(sound).crashes[0].cause == "exit_7"
    for bad in (b'"cause":"<script>"', b'"cause":"' + b"x" * 40 + b'"', b'"exit_code":-5'):
        field = bad.split(b":")[0]
        start = sound.index(field)
        end = sound.index(b",", start)
        with pytest.raises(ReportError):
            HostReport.decode(sound[:start] + bad + sound[end:])
    many = CrashLog()
    for _ in range(60):
        crash(many)
    assert len(report(many).crashes) == 50  # the master keeps the latest 50, the bound
