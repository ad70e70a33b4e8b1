"""More queues with work than slots (pure planner): idle slots go to queues with work, and
queues due a fraction of a slot take turns; none starves for more than a few plans."""
from __future__ import annotations

import math
from collections import deque

from config.models import QueueConfig
from manager.planning.planner import plan
from manager.storage.model import HostCapacity, QueueStats, SlotMap

TARGET = 0.8
WINDOW_S = 60.0
PLAN_S = 5.0
JOB_S = 0.2
QUEUES = [f"q{i:02d}" for i in range(60)]
CONFIG = {q: QueueConfig(min_slots=0) for q in QUEUES}
HOSTS = [HostCapacity(f"h{i}", 4) for i in range(6)]  # 24 slots
CAPACITY = sum(h.capacity_slots for h in HOSTS)


def one_slot_each(queues: list[str]) -> SlotMap:
    hosts: dict[str, dict[str, str]] = {h.host: {} for h in HOSTS}
    for index, queue in enumerate(queues):
        host = HOSTS[index % len(HOSTS)].host
        hosts[host][f"{host}:{len(hosts[host]) + 1}"] = queue
    return SlotMap(hosts=hosts)


def test_idle_slots_go_to_the_queues_with_work_and_no_slot_at_the_next_plan() -> None:
    # The first 24 queues ran their 10 jobs (2 s) on their slot and have nothing left; the
    # other 36 have 10 jobs each and never ran one (no job time yet).
    done = QUEUES[:24]
    current = one_slot_each(done)
    stats = {q: QueueStats(jobs_done=10, busy_s=10 * JOB_S, slot_lifetime_s=PLAN_S, window_s=WINDOW_S)
             for q in done}
    stats |= {q: QueueStats(waiting_jobs=10, window_s=WINDOW_S) for q in QUEUES[24:]}
    result = plan(current, CONFIG, stats, HOSTS, target_load=TARGET, full_window_s=WINDOW_S)
    counts = result.slot_map.counts()
    assert sum(counts.values()) == CAPACITY
    assert sorted(q for q, n in counts.items() if n) == QUEUES[24:48]


def test_queues_due_a_fraction_of_a_slot_take_turns_and_none_starves_past_three_plans() -> None:
    # Every queue keeps a backlog of 1,000 jobs for the whole test: 60 queues want slots, 24
    # exist, each queue's fair share is 0.4 slot. Served in turn, a queue waits at most
    # ceil(60 / 24) = 3 plans for one.
    history: dict[str, deque[int]] = {q: deque(maxlen=int(WINDOW_S / PLAN_S)) for q in QUEUES}
    current = SlotMap(hosts={h.host: {} for h in HOSTS})
    known = {q: 0.0 for q in QUEUES}
    unserved_plans = {q: 0 for q in QUEUES}
    longest = {q: 0 for q in QUEUES}
    moves = 0
    for _ in range(40):
        stats = {}
        for q in QUEUES:
            slot_s = sum(history[q]) * PLAN_S  # every slot busy all the time it had
            stats[q] = QueueStats(waiting_jobs=1000, jobs_done=round(slot_s / JOB_S), busy_s=slot_s,
                                  slot_lifetime_s=slot_s, window_s=WINDOW_S, known_job_s=known[q])
        result = plan(current, CONFIG, stats, HOSTS, target_load=TARGET, full_window_s=WINDOW_S)
        moves += len(result.moves)
        current = result.slot_map
        counts = current.counts()
        assert sum(counts.values()) == CAPACITY
        for q in QUEUES:
            history[q].append(counts.get(q, 0))
            if counts.get(q, 0):
                known[q] = JOB_S
                unserved_plans[q] = 0
            else:
                unserved_plans[q] += 1
                longest[q] = max(longest[q], unserved_plans[q])
    assert max(longest.values()) <= math.ceil(len(QUEUES) / CAPACITY), longest
    # Turns cost a retarget per slot and plan at most, never a stop and a fork.
    assert moves <= 40 * CAPACITY + CAPACITY
