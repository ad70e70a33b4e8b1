"""Every frame a peer sends is bounded where it is decoded (config/bounded.py, issue 16)."""
from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from config.bounded import MAX_LOAD
from config.errors import ConfigError
from config.models import MasterConfig
from master.capacity import Capacity
from master.host import HostFigures, host_name
from master.manager_frames import LinkFrameError, ManagerFrame, MasterFrame
from master.report import HostReport, build_report
from slot.beacon import Beacon
from slot.errors import MessageError


def report(**changes: Any) -> dict[str, Any]:
    slot = {"slot_id": 1, "pid": 11, "state": "running", "phase": "idle", "queue": "q",
            "assigned_queue": "q", "uptime_s": 5.0, "busy_s": 1.5}
    body: dict[str, Any] = {
        "host": "node01.example", "master_pid": 10, "sent_at_unix": 1.7e9, "capacity": 4,
        "capacity_by_memory": 4, "capacity_by_load": 4, "max_slots": 4, "avg_slot_bytes": 1,
        "master_pss_bytes": 1, "slots_pss_bytes": 1, "slots_measured": 1, "mem_available_bytes": 1,
        "load_avg_1m": 0.5, "cpus": 2, "slots": [slot],
    }
    for key, value in changes.items():
        if key.startswith("slot_"):
            slot[key.removeprefix("slot_")] = value
        else:
            body[key] = value
    return body


def decode(body: dict[str, Any]) -> MasterFrame:
    return MasterFrame.decode(json.dumps({"report": body}).encode())


def test_a_sound_report_decodes() -> None:
    assert decode(report()).report.host == "node01.example"


@pytest.mark.parametrize("changes", [
    {"slot_busy_s": float("nan")}, {"slot_busy_s": float("inf")}, {"slot_busy_s": -1.0},
    {"slot_busy_s": 1e300}, {"slot_uptime_s": float("-inf")}, {"load_avg_1m": float("nan")},
    {"sent_at_unix": float("inf")}, {"load_limit": float("nan")}, {"load_limit": -1.0},
    {"capacity": 10**400}, {"capacity": -1}, {"cpus": 2**64},
    {"master_pid": 0}, {"slot_pid": 2**40}, {"slot_jobs_done": 2**63},
    {"host": '"><script>alert(1)</script>'}, {"host": ""}, {"host": "a b"}, {"host": "h:1"},
    {"host": "x" * 254}, {"slot_queue": "q<"}, {"slot_assigned_queue": "q" * 129},
    {"unhandled_queues": [f"q{i}" for i in range(5000)]},
    {"unhandled_queues": ["not a queue"]},
    {"handler_failures": {"mod": "x" * 2001}},
    {"handler_failures": {f"m{i}": "e" for i in range(5000)}},
    {"queue_settings": {"q'": {"batch_size": 1, "batch_size_source": "config", "handler": "h"}}},
    {"slots": []},  # not out of bounds: the control
], ids=repr)
def test_an_out_of_bounds_field_is_refused_with_the_links_error(changes: dict[str, Any]) -> None:
    if changes == {"slots": []}:
        assert decode(report(**changes)).report.slots == []
        return
    with pytest.raises(LinkFrameError):
        decode(report(**changes))


def test_a_report_of_10001_slots_is_refused() -> None:
    body = report()
    body["slots"] = body["slots"] * 10_001
    with pytest.raises(LinkFrameError, match="at most 10000"):
        decode(body)


def test_the_managers_map_is_bounded_at_the_master_too() -> None:
    assert ManagerFrame.decode(b'{"manager_pid": 1, "slots": {"1": "q"}}').slots == {1: "q"}
    for bad in (b'{"manager_pid": 1, "slots": {"1": "q\\"><b>"}}', b'{"manager_pid": 1, "slots": {"-1": "q"}}',
                b'{"manager_pid": 0}'):
        with pytest.raises(LinkFrameError):
            ManagerFrame.decode(bad)


@pytest.mark.parametrize("field,value", [("busy_s", float("nan")), ("batch_age_s", float("inf")),
                                         ("queue", "q r"), ("exit_reason", "x" * 2001), ("jobs_done", 2**63)])
def test_a_beacon_out_of_bounds_is_refused(field: str, value: Any) -> None:
    beacon = {"slot_id": 1, "pid": 2, "seq": 3, "phase": "idle", "queue": "q", field: value}
    with pytest.raises(MessageError):
        Beacon.decode(json.dumps(beacon).encode())


def test_the_report_model_builds_what_a_master_sends() -> None:
    """The master's own report is inside every bound (it is the same model)."""
    built = HostReport.model_validate(report())
    assert HostReport.decode(built.encode()) == built


def test_a_long_import_error_is_cut_to_fit_the_report_not_refused_with_it() -> None:
    built = build_report(
        host="h", master_pid=1, sent_at_unix=1.0, now=1.0,
        capacity=Capacity(slots=1, by_memory=1, by_load=1, max_slots=1, avg_slot_bytes=1),
        figures=HostFigures(master_pss_bytes=1, slots_pss_bytes=(), mem_available_bytes=1,
                            load_avg_1m=0.0, cpus=1),
        slots=[], counters={}, handler_failures={"module " + "m" * 600: "ImportError: " + "x" * 5000},
        unhandled_queues=[],
    )
    [(source, why)] = built.handler_failures.items()
    assert len(source) == 512 and len(why) == 2000 and why.endswith("\u2026")
    assert HostReport.decode(built.encode()) == built


def test_a_load_limit_set_huge_to_turn_the_bound_off_is_reported_within_bounds() -> None:
    built = build_report(
        host="h", master_pid=1, sent_at_unix=1.0, now=1.0,
        capacity=Capacity(slots=1, by_memory=1, by_load=1, max_slots=1, avg_slot_bytes=1,
                          load_limit=1e300),
        figures=HostFigures(master_pss_bytes=1, slots_pss_bytes=(), mem_available_bytes=1,
                            load_avg_1m=0.0, cpus=1),
        slots=[], counters={}, handler_failures={}, unhandled_queues=[],
    )
    assert built.load_limit == MAX_LOAD
    assert HostReport.decode(built.encode()) == built


def test_a_report_without_a_load_limit_leaves_the_field_out_for_an_older_manager() -> None:
    assert b"load_limit" not in HostReport.model_validate(report()).encode()
    assert b'"load_limit":8.0' in HostReport.model_validate(report(load_limit=8.0)).encode()


def test_a_host_name_the_manager_would_refuse_stops_the_master_at_start_with_the_fix() -> None:
    assert host_name("node-01.example") == "node-01.example"
    for bad in ("node 01", 'a"><b>', "h:1", "-x"):
        with pytest.raises(ConfigError, match=r"set \[master\] host_name"):
            host_name(bad)
    with pytest.raises(ValidationError, match="host_name"):
        MasterConfig(host_name="node 01")


def test_recycles_after_jobs_or_age_travel_in_fields_of_their_own_an_older_manager_skips() -> None:
    from manager.storage.samples import host_samples
    from master.lifecycle import Counter

    def built(counters: dict[Counter, int]) -> HostReport:
        return build_report(
            host="h", master_pid=1, sent_at_unix=1.0, now=1.0,
            capacity=Capacity(slots=1, by_memory=1, by_load=1, max_slots=1, avg_slot_bytes=1),
            figures=HostFigures(master_pss_bytes=1, slots_pss_bytes=(), mem_available_bytes=1,
                                load_avg_1m=0.0, cpus=1),
            slots=[], counters=counters, handler_failures={}, unhandled_queues=[])

    # None yet: the frame is the one a manager of the release before reads.
    sent = built({Counter.RECYCLED_FOR_MEMORY: 2}).encode()
    assert b"recycled_for_jobs" not in sent and b"recycled_for_age" not in sent
    report = built({Counter.RECYCLED_FOR_MEMORY: 2, Counter.RECYCLED_FOR_JOBS: 7, Counter.RECYCLED_FOR_AGE: 3})
    # Never in `counters`, whose keys that manager validates as a closed set.
    assert report.counters == {Counter.RECYCLED_FOR_MEMORY: 2}
    assert (report.recycled_for_jobs, report.recycled_for_age) == (7, 3)
    assert HostReport.decode(report.encode()) == report
    [row] = host_samples(at_unix=1.0, reports=[(report, True)])
    assert (row.recycled_for_memory, row.recycled_for_jobs, row.recycled_for_age) == (2, 7, 3)
