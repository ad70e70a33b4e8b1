"""host_capped_by_load events from the masters' reports: one when the cap starts, one when it ends."""
from __future__ import annotations

from manager.hosts.load_caps import LoadCaps
from manager.storage.samples import host_samples
from manager.storage.store import EventKind
from master.report import HostReport


def report(*, by_load: int, load: float, host: str = "h1", by_memory: int = 6,
           max_slots: int = 8, load_limit: float = 8.0) -> HostReport:
    return HostReport(
        host=host, master_pid=10, sent_at_unix=1000.0, capacity=min(by_load, by_memory, max_slots),
        capacity_by_memory=by_memory, capacity_by_load=by_load, max_slots=max_slots,
        avg_slot_bytes=0, master_pss_bytes=0, slots_pss_bytes=0, slots_measured=0,
        mem_available_bytes=0, load_avg_1m=load, cpus=2, load_limit=load_limit, slots=[],
    )


def test_a_cap_is_told_once_when_it_starts_and_once_when_it_ends() -> None:
    caps = LoadCaps()
    assert caps.on_report(report(by_load=8, load=1.0)) is None
    started = caps.on_report(report(by_load=1, load=40.0))
    assert started is not None and started.kind == EventKind.HOST_CAPPED_BY_LOAD
    assert started.host == "h1"
    assert started.message == "h1 capped by load: 1 of 6 slots (load 40.00 on 2 CPUs, limit 8)"
    # The cap's size moves with the load: no event per report.
    assert caps.on_report(report(by_load=2, load=30.0)) is None
    ended = caps.on_report(report(by_load=8, load=3.0))
    assert ended is not None and ended.kind == EventKind.HOST_LOAD_CAP_LIFTED
    assert caps.on_report(report(by_load=8, load=3.0)) is None


def test_memory_setting_the_capacity_is_no_load_cap() -> None:
    assert report(by_load=6, load=9.0, by_memory=6).load_cap() is None
    assert report(by_load=3, load=9.0, by_memory=2).load_cap() is None
    assert report(by_load=3, load=9.0, by_memory=4).load_cap() is not None


def test_a_master_too_old_to_send_its_limit_is_never_called_capped() -> None:
    assert report(by_load=1, load=40.0, load_limit=0.0).load_cap() is None


def test_the_notice_names_the_load_the_cpus_and_the_limit() -> None:
    assert report(by_load=2, load=12.5, load_limit=4.5).load_cap() == (
        "capped by load: 2 of 6 slots (load 12.50 on 2 CPUs, limit 4.5)")


def test_hosts_are_told_apart() -> None:
    caps = LoadCaps()
    assert caps.on_report(report(by_load=1, load=40.0, host="a")) is not None
    assert caps.on_report(report(by_load=1, load=40.0, host="b")) is not None
    assert caps.on_report(report(by_load=1, load=40.0, host="a")) is None


def test_the_host_sample_keeps_the_notice_of_a_live_capped_host_only() -> None:
    capped, free = report(by_load=1, load=40.0, host="a"), report(by_load=8, load=1.0, host="b")
    rows = host_samples(at_unix=1.0, reports=[(capped, True), (free, True), (capped, False)])
    assert [row.load_cap for row in rows] == [capped.load_cap(), None, None]
    assert rows[0].load_cap == "capped by load: 1 of 6 slots (load 40.00 on 2 CPUs, limit 8)"
