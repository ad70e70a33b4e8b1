"""The planner's inputs checked at its boundary: one bad figure costs its queue, not the plan."""
from __future__ import annotations

import math

import pytest

from config.models import QueueConfig
from manager.planning import planner
from manager.planning.plan_guard import check_inputs
from manager.storage.model import HostCapacity, QueueStats, SlotMap

QUEUES = {"bad": QueueConfig(max_slots=4), "good": QueueConfig(max_slots=4)}
HOSTS = [HostCapacity("a", 8)]
GOOD = QueueStats(waiting_jobs=100, jobs_done=10, busy_s=10.0, slot_lifetime_s=10.0, window_s=60.0)


@pytest.mark.parametrize("bad", [
    QueueStats(busy_s=math.nan, jobs_done=1, slot_lifetime_s=1.0),
    QueueStats(busy_s=math.inf, jobs_done=1, slot_lifetime_s=1.0),
    QueueStats(slot_lifetime_s=-1.0, busy_s=1.0, jobs_done=1),
    QueueStats(window_s=math.nan, busy_s=1.0, jobs_done=1, slot_lifetime_s=1.0),
], ids=repr)
def test_a_queue_with_unsound_figures_is_planned_as_idle_and_the_others_as_usual(bad: QueueStats) -> None:
    checked = check_inputs({"bad": bad, "good": GOOD}, HOSTS)
    assert set(checked.rejected) == {"queue bad"}
    assert checked.stats["good"] == GOOD
    result = planner.plan(SlotMap(hosts={"a": {}}), QUEUES, checked.stats, checked.hosts, target_load=0.8)
    assert result.queues["good"].planned_slots > 0
    assert result.queues["bad"].planned_slots == 0


def test_without_the_check_one_nan_fails_the_whole_plan() -> None:
    """Why the check is there: the planner's arithmetic does not survive a NaN."""
    bad = QueueStats(waiting_jobs=5, busy_s=math.nan, jobs_done=1, slot_lifetime_s=1.0)
    with pytest.raises(ValueError, match="NaN"):
        planner.plan(SlotMap(hosts={"a": {}}), QUEUES, {"bad": bad, "good": GOOD}, HOSTS, target_load=0.8)


def test_a_host_capacity_out_of_range_is_clamped() -> None:
    checked = check_inputs({}, [HostCapacity("a", -3), HostCapacity("b", 10**400), HostCapacity("c", 5)])
    assert [h.capacity_slots for h in checked.hosts] == [0, 10_000, 5]
    assert set(checked.rejected) == {"host a", "host b"}
