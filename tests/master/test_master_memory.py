"""Real forks on real /proc: shared preloaded pages, PSS-based capacity, Private_Dirty recycling."""
from __future__ import annotations

import json
from pathlib import Path

from master_procs import StartMaster, poll_until
from polling import DEADLINE_S

from master.capacity import capacity
from master.lifecycle import Counter
from master.report import HostReport
from slot.memory import read_memory

MB = 1024 * 1024


def test_forked_slots_share_the_200_mb_the_master_preloaded(start_master: StartMaster) -> None:
    master = start_master(modules=["sm_test_preload"], static_slots={"preloaded": 4})

    def settled(report: HostReport) -> bool:
        """4 slots measured, and the report's PSS figures agree with /proc now within 10%
        (slots measure every second: the first ones measured before their siblings forked)."""
        if report.slots_measured != 4 or len(report.slots) != 4:
            return False
        try:  # a slot of this report may have been replaced since: not settled yet
            real = sum(read_memory(pid).pss_bytes for pid in [master.pid] + [s.pid for s in report.slots])
        except ProcessLookupError:
            return False
        return abs(report.master_pss_bytes + report.slots_pss_bytes - real) < 0.1 * real

    report = master.wait_report(settled, what="4 slots with settled PSS figures", timeout_s=DEADLINE_S)
    pids = [master.pid] + [slot.pid for slot in report.slots]
    usages = [read_memory(pid) for pid in pids]
    rss_bytes = [usage.rss_bytes for usage in usages]
    pss_total = sum(usage.pss_bytes for usage in usages)
    # Every process maps the 200 MB: RSS counts it five times, PSS once.
    assert min(rss_bytes) > 200 * MB
    assert pss_total < 0.4 * sum(rss_bytes), (pss_total, rss_bytes)
    assert pss_total < 200 * MB + 5 * 40 * MB
    for slot in report.slots:
        assert slot.private_dirty_bytes < 30 * MB, slot

    # The capacity in the report is the formula applied to its (real, checked below) figures.
    # The formula takes the slots' PSS sum and count: the report's own sum, split evenly,
    # not the per-slot beacon figures, which may be a second newer (slots still settling).
    count = len(report.slots)
    even_share = report.slots_pss_bytes // count
    slots_pss = [even_share] * (count - 1) + [report.slots_pss_bytes - even_share * (count - 1)]
    expected = capacity(
        master_pss_bytes=report.master_pss_bytes,
        slots_pss_bytes=slots_pss,
        mem_available_bytes=report.mem_available_bytes,
        reserve_slots=1,
        max_slots=10**6,
        load_avg_1m=0.0,
        cpus=report.cpus,
        max_load_per_cpu=1000.0,
    )
    average = (report.master_pss_bytes + report.slots_pss_bytes) // 4
    assert report.avg_slot_bytes == average
    assert report.capacity_by_memory == (report.master_pss_bytes + report.slots_pss_bytes
                                         + report.mem_available_bytes) // average - 1
    assert expected.by_memory == report.capacity_by_memory
    assert report.capacity == min(report.capacity_by_memory, report.max_slots)
    # ... and those figures are the real ones: what /proc says now, within 10%.
    assert abs(report.master_pss_bytes + report.slots_pss_bytes - pss_total) < 0.1 * pss_total


def test_a_slot_that_leaks_is_recycled_on_private_dirty_and_loses_no_job(
    start_master: StartMaster, tmp_path: Path
) -> None:
    master = start_master(
        modules=["sm_test_behaviours"],
        static_slots={"leaky": 1},
        queues={"leaky": {"private_dirty_limit_bytes": 30 * MB, "lock_timeout_s": 5.0}},
    )
    first = master.wait_running("leaky", 1).slots[0].pid
    log = tmp_path / "leaky.log"
    client = master.client()
    client.put_many("leaky", [json.dumps({"log": str(log), "n": n}) for n in range(30)])
    # A slot reads its memory every second: at 50 ms and 4 MB a job it passes 30 MB well
    # before then, so each slot does about 20 jobs and the 30 jobs need at least two slots.
    report = master.wait_report(
        lambda r: r.counters.get(Counter.RECYCLED_FOR_MEMORY, 0) >= 1, what="a memory recycle"
    )
    poll_until(lambda: client.total("leaky").jobs == 0 and client.total("leaky").running == 0,
               what="every leaky job done")
    lines = log.read_text().splitlines()
    pids = {line.split()[0] for line in lines}
    assert str(first) in pids and len(pids) >= 2
    # Each job done exactly once: a slot acknowledges its batch before it exits.
    assert sorted(int(line.split()[1]) for line in lines) == list(range(30))
    assert "recycled for memory" in master.log_text()
    assert report.counters.get(Counter.CRASHED, 0) == 0


def test_a_slot_past_the_hard_memory_limit_is_killed_by_the_master(
    start_master: StartMaster, tmp_path: Path
) -> None:
    # The slot's own limit is out of reach: only the master's hard limit can stop it.
    master = start_master(
        modules=["sm_test_behaviours"], static_slots={"leaky": 1}, hard_memory_limit_bytes=30 * MB,
        queues={"leaky": {"private_dirty_limit_bytes": 10**12, "lock_timeout_s": 1.0}},
    )
    first = master.wait_running("leaky", 1).slots[0].pid
    log = tmp_path / "leaky.log"
    master.client().put_many("leaky", [json.dumps({"log": str(log), "n": n}) for n in range(40)])
    master.wait_report(lambda r: r.counters.get(Counter.KILLED_OVER_MEMORY, 0) >= 1
                       and first not in [s.pid for s in r.slots],
                       what="the slot killed over the hard limit and reaped")
    assert "over the hard limit" in master.log_text()


def test_a_slot_whose_setup_alone_passes_the_private_dirty_limit_serves_instead_of_recycling(
    start_master: StartMaster, tmp_path: Path
) -> None:
    master = start_master(modules=["sm_test_fat"], static_slots={"fat_setup": 1},
                          queues={"fat_setup": {"private_dirty_limit_bytes": 20 * MB}})
    first = master.wait_running("fat_setup", 1).slots[0].pid
    log = tmp_path / "fat.log"
    client = master.client()
    client.put_many("fat_setup", [json.dumps({"log": str(log), "n": n}) for n in range(20)])
    poll_until(lambda: client.total("fat_setup").jobs == 0 and client.total("fat_setup").running == 0,
               what="every job done")
    # A slot reads its memory every second: let it read a few times more while idle.
    report = master.wait_report(lambda r: r.slots and r.slots[0].private_dirty_bytes > 40 * MB,
                                what="the slot measured with its 40 MB")
    lines = log.read_text().splitlines()
    assert {line.split()[0] for line in lines} == {str(first)}
    assert report.slots[0].pid == first
    assert report.counters.get(Counter.RECYCLED_FOR_MEMORY, 0) == 0
    text = master.log_text()
    assert text.count("forked slot") == 1
    assert "over private_dirty_limit_bytes 20971520 B" in text
