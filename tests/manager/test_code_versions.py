"""host_code_reloaded / host_code_reload_refused events from the masters' reports (pure)."""
from __future__ import annotations

from typing import Any

from manager.events.code_versions import CodeVersions, other_code
from manager.storage.store import EventKind
from master.report import HostReport


def report(pid: int = 10, **code: Any) -> HostReport:
    return HostReport(host="alpha", master_pid=pid, sent_at_unix=1.0, capacity=4, capacity_by_memory=4,
                      capacity_by_load=4, max_slots=4, avg_slot_bytes=1, master_pss_bytes=1,
                      slots_pss_bytes=0, slots_measured=0, mem_available_bytes=1, load_avg_1m=0.0,
                      cpus=2, slots=[], **code)


def test_one_event_per_reload_and_per_new_refusal_none_per_report() -> None:
    versions = CodeVersions()
    assert versions.on_report(report(code_version="aaa")) == []
    assert versions.on_report(report(code_version="aaa")) == []
    [reloaded] = versions.on_report(report(code_version="bbb", code_generation=1))
    assert reloaded.kind is EventKind.HOST_CODE_RELOADED and reloaded.detail == {
        "from": "aaa", "to": "bbb", "generation": 1}
    failure = "code reload refused: the new code failed to import: x; version bbb keeps serving"
    [refused] = versions.on_report(report(code_version="bbb", code_generation=1, code_reload_failure=failure))
    assert refused.kind is EventKind.HOST_CODE_RELOAD_REFUSED and failure in refused.message
    assert versions.on_report(report(code_version="bbb", code_generation=1, code_reload_failure=failure)) == []


def test_a_restarted_master_starting_again_at_generation_0_is_no_event() -> None:
    versions = CodeVersions()
    versions.on_report(report(code_version="aaa", code_generation=3))
    assert versions.on_report(report(pid=11, code_version="ccc")) == []


def test_old_managers_read_a_report_without_the_code_fields() -> None:
    # Defaults are not sent (LATER_FIELDS): a manager of the release before forbids extra fields.
    assert b"code_" not in report().encode()
    assert b"code_version" in report(code_version="aaa").encode()


def test_other_code_is_a_live_host_off_the_version_most_live_hosts_run() -> None:
    hosts = [("a", True, "v2"), ("b", True, "v1"), ("c", True, "v2"), ("d", False, "v0"), ("e", True, None)]
    assert other_code(hosts) == {"b"}
    assert other_code([("a", True, "v1"), ("b", False, "v2")]) == set()
