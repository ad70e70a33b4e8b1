from manager.planning.stabilise import RecentPlans
from manager.storage.model import Plan, QueuePlan, SlotMap


def plan_of(**planned: int) -> Plan:
    queues = {
        q: QueuePlan(queue=q, priority=0, load=0.0, demand_slots=0.0, desired_slots=n,
                     planned_slots=n, slots=n)
        for q, n in planned.items()
    }
    return Plan(slot_map=SlotMap.empty(), queues=queues, moves=())


def test_recent_plans_keep_each_queues_highest_count_within_the_window() -> None:
    recent = RecentPlans(window_s=300.0)
    assert recent.keep(0.0) == {}
    recent.record(0.0, plan_of(a=30, b=2))
    recent.record(5.0, plan_of(a=4, b=3))
    assert recent.keep(10.0) == {"a": 30, "b": 3}
    # The plan at 0 s leaves the window after 300 s; the one at 5 s is still in it.
    assert recent.keep(300.0) == {"a": 30, "b": 3}
    assert recent.keep(302.0) == {"a": 4, "b": 3}
    assert recent.keep(306.0) == {}
