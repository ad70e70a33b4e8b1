"""The manager's pure parts: report deltas -> window stats, adopted maps, overrides."""
from __future__ import annotations

from collections.abc import Sequence

import pytest

from config.models import QueueConfig
from manager.events.event_builders import moves_events, override_events
from manager.hosts.masters import adopt, host_part
from manager.storage.model import Move, MoveKind, Plan, QueueStats, SlotMap
from manager.storage.stats import Totals, WorkWindow
from manager.storage.store import Override, apply_overrides
from master.lifecycle import SlotState
from master.report import HostReport, SlotReport


def slot(slot_id: int, queue: str, *, pid: int = 0, jobs: int = 0, busy_s: float = 0.0,
         errors: int = 0, uptime_s: float = 100.0, state: SlotState = SlotState.RUNNING,
         assigned: str | None = None) -> SlotReport:
    return SlotReport(
        slot_id=slot_id, pid=pid or 1000 + slot_id, state=state, phase=None, queue=queue,
        assigned_queue=assigned or queue, uptime_s=uptime_s, jobs_done=jobs, busy_s=busy_s,
        errors=errors,
    )


def report(host: str, slots: Sequence[SlotReport], *, capacity: int = 8) -> HostReport:
    return HostReport(
        host=host, master_pid=1, sent_at_unix=0.0, capacity=capacity, capacity_by_memory=capacity,
        capacity_by_load=capacity, max_slots=capacity, avg_slot_bytes=0, master_pss_bytes=0,
        slots_pss_bytes=0, slots_measured=0, mem_available_bytes=0, load_avg_1m=0.0, cpus=2,
        slots=list(slots),
    )


def test_the_first_report_of_a_host_only_sets_the_baseline() -> None:
    window = WorkWindow(window_s=60.0, max_gap_s=3.0, started_at=0.0)
    assert window.on_report(report("a", [slot(1, "q", jobs=500, busy_s=50.0)]), 1.0) == []
    assert window.totals(1.0) == {}


def test_counter_growth_between_reports_is_the_queues_work_and_slot_time() -> None:
    window = WorkWindow(window_s=60.0, max_gap_s=3.0, started_at=0.0)
    window.on_report(report("a", [slot(1, "q", jobs=10, busy_s=1.0), slot(2, "q", jobs=5)]), 1.0)
    window.on_report(report("a", [slot(1, "q", jobs=30, busy_s=3.0, errors=1),
                                  slot(2, "q", jobs=5)]), 2.0)
    assert window.totals(2.0) == {"q": Totals(jobs_done=20, busy_s=2.0, errors=1, slot_s=2.0)}
    stats = window.queue_stats(2.0, {"q": 7, "idle": 3})
    assert stats["q"] == QueueStats(waiting_jobs=7, jobs_done=20, busy_s=2.0, slot_lifetime_s=2.0,
                                    window_s=2.0)
    assert stats["idle"].waiting_jobs == 3 and stats["idle"].slot_lifetime_s == 0.0


def test_a_slot_forked_since_the_last_report_counts_from_its_fork() -> None:
    window = WorkWindow(window_s=60.0, max_gap_s=3.0, started_at=0.0)
    window.on_report(report("a", [slot(1, "q", jobs=10)]), 1.0)
    # Slot 1 was re-forked (new pid) and slot 2 is new: both count from zero.
    window.on_report(report("a", [slot(1, "q", pid=77, jobs=4, uptime_s=0.5),
                                  slot(2, "r", jobs=2, uptime_s=0.25)]), 2.0)
    totals = window.totals(2.0)
    assert totals["q"] == Totals(jobs_done=4, slot_s=0.5)
    assert totals["r"] == Totals(jobs_done=2, slot_s=0.25)


def test_work_older_than_the_window_drops_out_and_a_long_gap_is_not_counted_in_full() -> None:
    window = WorkWindow(window_s=10.0, max_gap_s=3.0, started_at=0.0)
    window.on_report(report("a", [slot(1, "q", jobs=0)]), 1.0)
    window.on_report(report("a", [slot(1, "q", jobs=5)]), 2.0)
    window.on_report(report("a", [slot(1, "q", jobs=6)]), 20.0)
    assert window.totals(20.0) == {"q": Totals(jobs_done=1, slot_s=3.0)}
    assert window.effective_window_s(20.0) == 10.0
    assert window.totals(20.0, since=25.0) == {}


def test_a_forgotten_host_starts_a_new_baseline() -> None:
    window = WorkWindow(window_s=60.0, max_gap_s=3.0, started_at=0.0)
    window.on_report(report("a", [slot(1, "q", jobs=1)]), 1.0)
    window.forget("a")
    assert window.on_report(report("a", [slot(1, "q", jobs=100)]), 2.0) == []


def test_the_adopted_map_has_the_serving_slots_on_the_queue_the_master_wants() -> None:
    seen = report("h-1.example", [
        slot(1, "old", assigned="new"),
        slot(2, "q", state=SlotState.DRAINING),
        slot(3, "q", state=SlotState.STARTING),
    ])
    assert adopt(seen) == {"h-1.example:1": "new", "h-1.example:3": "q"}
    assert host_part("h-1.example", adopt(seen)) == {1: "new", 3: "q"}


def test_overrides_pause_a_queue_and_change_its_min_and_max() -> None:
    queues = {"a": QueueConfig(min_slots=2, max_slots=10), "b": QueueConfig(min_slots=1),
              "c": QueueConfig()}
    overrides = {
        "a": Override("a", paused=True, min_slots=None, max_slots=None, updated_at_unix=1.0),
        "b": Override("b", paused=False, min_slots=5, max_slots=3, updated_at_unix=2.0),
        "gone": Override("gone", paused=True, min_slots=None, max_slots=None, updated_at_unix=3.0),
    }
    applied = apply_overrides(queues, overrides)
    assert (applied["a"].min_slots, applied["a"].max_slots) == (0, 0)
    # A min above the max is held to the max.
    assert (applied["b"].min_slots, applied["b"].max_slots) == (3, 3)
    assert applied["c"] == queues["c"]
    assert set(applied) == {"a", "b", "c"}


def test_an_override_makes_one_event_until_it_changes_again() -> None:
    override = Override("a", paused=True, min_slots=1, max_slots=None, updated_at_unix=5.0)
    [event] = override_events({}, {"a": override})
    assert event.queue == "a" and event.actor == "admin"
    assert event.message == "queue a: override applied (paused, min 1)"
    assert override_events({"a": 5.0}, {"a": override}) == []


@pytest.mark.parametrize("moves,expected", [
    ((), []),
    ((Move(MoveKind.SPAWN, "h", "h:1", None, "q"), Move(MoveKind.RETARGET, "h", "h:2", "r", "q")),
     [("q", "q: +2 slots (2 in, 0 out; retarget, spawn)"), ("r", "r: -1 slots (0 in, 1 out; retarget)")]),
])
def test_a_plan_with_moves_makes_one_event_per_queue_it_touched(
    moves: tuple[Move, ...], expected: list[tuple[str, str]]
) -> None:
    events = moves_events(Plan(slot_map=SlotMap.empty(), queues={}, moves=moves))
    assert [(event.queue, event.message) for event in events] == expected
