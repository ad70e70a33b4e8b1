"""A burst check with nothing to take makes no burst plan (manager/planning/burst.py's
`anything_to_take`): queues with jobs and no slot burst at every check, and with busy queues of
their priority or higher on every slot, the plan moved nothing at a cost of 5.6 s CPU per
check at 10,000 queues (bench/burst_check_cost.py)."""
from __future__ import annotations

import random

from config.models import QueueConfig
from manager.planning.burst import anything_to_take, bursting, plan_burst
from manager.storage.model import HostCapacity, QueueStats, SlotMap

TARGET = 0.8
QUEUES = {
    "busy": QueueConfig(priority=5, min_slots=1, max_slots=10),
    "vip": QueueConfig(priority=9, min_slots=1, max_slots=10),
    "waiting": QueueConfig(priority=5, min_slots=0, max_slots=10),
    "bulk": QueueConfig(priority=0, min_slots=0, max_slots=10),
}
HOST = [HostCapacity("h", 4)]


def slots(**counts: int) -> SlotMap:
    names = [queue for queue, n in counts.items() for _ in range(n)]
    return SlotMap(hosts={"h": {f"s{i}": queue for i, queue in enumerate(names)}})


def test_busy_queues_of_equal_or_higher_priority_on_every_slot_leave_nothing_to_take() -> None:
    current = slots(busy=2, vip=2)
    found = bursting({"waiting": 50}, {"waiting": 50}, QUEUES, current.counts())
    assert found == ["waiting"]  # a burst at every check, its backlog unchanged
    assert not anything_to_take(current, QUEUES, HOST, found, last_planned=current.counts())
    stats = {"waiting": QueueStats(waiting_jobs=50, known_job_s=1.0)}
    assert plan_burst(current, QUEUES, stats, HOST, found, target_load=TARGET,
                      last_planned=current.counts()).moves == ()


def test_a_free_slot_a_lower_priority_a_spare_or_an_idle_equal_priority_is_something_to_take() -> None:
    assert anything_to_take(slots(busy=2, vip=1), QUEUES, HOST, ["waiting"])  # one free
    assert anything_to_take(slots(busy=2, vip=1, bulk=1), QUEUES, HOST, ["waiting"])  # bulk: lower
    # busy at its minimum, but above the last full plan's count: a spare, for a higher burst only.
    low_queues = {**QUEUES, "busy": QueueConfig(priority=4, min_slots=3, max_slots=10)}
    current = slots(busy=3, vip=1)
    assert anything_to_take(current, low_queues, HOST, ["waiting"], last_planned={"busy": 2})
    assert not anything_to_take(current, low_queues, HOST, ["waiting"], last_planned={"busy": 3})
    # busy idle (nothing waiting, nothing running) and of waiting's priority: its first slot.
    assert anything_to_take(slots(busy=2, vip=2), QUEUES, HOST, ["waiting"], idle=["busy"])
    assert not anything_to_take(slots(busy=1, vip=3), QUEUES, HOST, ["waiting"], idle=["busy"])  # at its minimum
    # A dead host's slots are no free capacity; a bursting queue gives nothing.
    dead = [HostCapacity("h", 4), HostCapacity("gone", 4, alive=False)]
    assert not anything_to_take(slots(busy=2, vip=2), QUEUES, dead, ["waiting"], last_planned={})
    assert not anything_to_take(slots(busy=2, vip=2), QUEUES, HOST, ["waiting", "busy"], idle=["busy"])
    assert not anything_to_take(slots(busy=4), QUEUES, HOST, [])


def test_nothing_to_take_means_the_burst_plan_would_move_nothing() -> None:
    """Random small clusters: wherever the check says nothing, plan_burst moves nothing (the
    skip changes no plan); and the check says something in some of them."""
    rng = random.Random(5)
    said_something = 0
    for _ in range(3000):
        queues = {f"q{n}": QueueConfig(priority=rng.randint(0, 3), min_slots=rng.randint(0, 2),
                                       max_slots=rng.randint(2, 6), batch_size=rng.choice((1, 10)))
                  for n in range(rng.randint(2, 6))}
        capacity = rng.randint(1, 8)
        hosts = [HostCapacity("h", capacity), HostCapacity("d", 2, alive=rng.random() < 0.5)]
        names = [q for q, c in queues.items() for _ in range(rng.randint(0, c.max_slots))]
        rng.shuffle(names)
        current = SlotMap(hosts={"h": {f"s{i}": q for i, q in enumerate(names[:capacity])},
                                 "d": {f"d{i}": q for i, q in enumerate(names[capacity:capacity + 2])}})
        counts = current.counts()
        waiting = {q: rng.choice((0, 0, 5, 50, 500)) for q in queues}
        before = {q: rng.choice((0, waiting[q])) for q in queues}
        found = bursting(before, waiting, queues, counts)
        stats = {q: QueueStats(waiting_jobs=waiting[q], jobs_done=rng.choice((0, 20)),
                               busy_s=rng.choice((0.0, 30.0)), known_job_s=rng.choice((0.0, 1.0)))
                 for q in queues}
        last = {q: max(0, n + rng.randint(-2, 1)) for q, n in counts.items()} if rng.random() < 0.7 else None
        idle = [q for q in queues if waiting[q] == 0 and rng.random() < 0.5]
        if anything_to_take(current, queues, hosts, found, last_planned=last, idle=idle):
            said_something += 1
            continue
        result = plan_burst(current, queues, stats, hosts, found, target_load=TARGET,
                            last_planned=last, idle=idle)
        assert result.moves == (), (queues, current, found, last, idle)
    assert said_something > 300
