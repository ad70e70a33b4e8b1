"""Bursts between plans (pure): which queues' backlogs appeared or jumped, and a plan that grows
only them, taking other queues' spares, then free capacity, then lower priorities' slots.

The full plan runs every `plan_interval_s` (5 s): a burst waited up to that long before
anything saw it (4,000 jobs into a queue with 1 slot of 8 stayed at 1 slot for 4.6-5.2 s).
The manager reads the queue server's waiting counts every `burst_check_s` and, when a queue
bursts, plans for it alone: no other queue grows, none of equal or higher priority shrinks
but by its spares, and the burst queue grows only past its dead band (as in a full plan) and
only for a backlog its slots would not start soon anyway (`outlasts_noise`).
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from config.models import QueueConfig
from manager.planning.placement import place
from manager.planning.planner import (
    NO_STATS,
    desired_count,
    job_time_s,
    queue_demand,
    window_slot_count,
)
from manager.storage.model import HostCapacity, Plan, QueuePlan, QueueStats, SlotMap

# A backlog "jumps" when it at least doubles and grows by this many batches: smaller
# changes are noise the full plan handles on its interval.
JUMP_FACTOR = 2.0
JUMP_BATCHES = 2
# A backlog the queue's slots now start within this many seconds, or within DRAIN_JOBS of
# its own jobs, is no burst, whatever its jump: a new slot takes about as long to arrive (a
# fork and a warm-up: the simulator's spawn_delay_s is 2 s), so the backlog is gone before
# the slot could help. Checked 20 times per plan, the waiting counts of a busy queue jump by
# two batches in Poisson noise alone, and every such plan took slots the next full plans
# kept (hosts_lost: media's 14 jobs of 2 s behind 22 slots, 1.3 s of work each, took 3 of
# archive's slots). The noise in that time grows with the job time (a wait of a few jobs
# is the usual queue at 80% load): media's 20 jobs behind 19-21 slots, 2.1-2.2 s, still
# took 6-7 slots of archive per burst plan at 2 s alone (hosts_lost seed 11: 165 moves
# against HPA's 163).
BURST_DRAIN_S = 2.0
DRAIN_JOBS = 2.0


def backlog_drain_s(stats: QueueStats, slots: int) -> float:
    """Seconds the queue's slots need to start every waiting job, each slot taking one job
    after another (inf with no slot, or with no job time measured or remembered: a backlog
    of unknown length is a burst; the plan then sizes it on the assumed job time). With the
    assumption here too, priority_storm's bulk_mail waited 9.6 s at p99 against 6.5 s
    (seed 12)."""
    job_s = job_time_s(stats, assume=False)
    if slots <= 0 or job_s is None:
        return float("inf") if stats.waiting_jobs > 0 else 0.0
    return stats.waiting_jobs * job_s / slots


def outlasts_noise(stats: QueueStats, slots: int) -> bool:
    """Whether the backlog takes the slots longer to start than BURST_DRAIN_S and than
    DRAIN_JOBS of the queue's jobs: a burst worth slots, not a queue's usual wait."""
    limit_s = max(BURST_DRAIN_S, DRAIN_JOBS * (job_time_s(stats, assume=False) or 0.0))
    return backlog_drain_s(stats, slots) >= limit_s


def measured(stats: QueueStats) -> bool:
    """Whether the queue's job time is measured (in the window, or remembered from before
    it), not assumed (manager/planning/planner.py's ASSUMED_JOB_S)."""
    return stats.jobs_done > 0 or stats.busy_s > 0 or stats.known_job_s > 0


def settled_waiting(
    previous: Mapping[str, int], waiting: Mapping[str, int], stats: Mapping[str, QueueStats],
) -> dict[str, int]:
    """The waiting counts later bursts are measured from, after a full plan: a queue with no
    job time measured or remembered keeps its earlier count. Full plans keep such a queue
    at what runs; recorded as planned, its backlog was no burst to the checks that followed,
    and a burst into a cold queue waited for the next full plan after its first batch was
    measured (issue 28: 6.3 s). Burst plans record every count (manager/service.py)."""
    return {q: n if measured(stats.get(q, NO_STATS)) else previous.get(q, 0) for q, n in waiting.items()}


def bursting(
    waiting_at_plan: Mapping[str, int], waiting_now: Mapping[str, int],
    queues: Mapping[str, QueueConfig], slots: Mapping[str, int],
) -> list[str]:
    """Queues with a backlog and no slot, and queues whose backlog appeared (none at the last
    plan: two batches) or jumped since, that could have more slots; most important first."""
    found = []
    for name, config in queues.items():
        now = waiting_now.get(name, 0)
        before = waiting_at_plan.get(name, 0)
        if now <= 0 or slots.get(name, 0) >= config.max_slots:
            continue
        grew = now - before >= JUMP_BATCHES * config.batch_size
        # A queue with no slot has nobody to take even one job: any backlog is a burst. One
        # with slots bursts only past noise: counting every backlog that appeared (a queue
        # of a few jobs a second is empty between them) as a burst moved slots at each
        # check in a short cluster (simulator, hosts_lost with burst checks: 228-283 moves
        # per run against HPA's 153-193; 72-89 with this rule).
        # A queue with none is a burst at every check, not only when its backlog appeared:
        # one left at none by a plan (more queues with work than slots) takes the first
        # slot that goes idle (plan_burst), not the next full plan's.
        appeared = slots.get(name, 0) == 0 or (before == 0 and grew)
        jumped = now >= JUMP_FACTOR * before and grew
        if appeared or jumped:
            found.append(name)
    return sorted(found, key=lambda q: (-queues[q].priority, q))


def plan_burst(
    current: SlotMap,
    queues: Mapping[str, QueueConfig],
    stats: Mapping[str, QueueStats],
    hosts: Sequence[HostCapacity],
    bursts: Sequence[str],
    *,
    target_load: float,
    last_planned: Mapping[str, int] | None = None,
    idle: Collection[str] = (),
) -> Plan:
    """Grow the bursting queues to their desired counts from the spares of lower-priority
    queues (their slots above `last_planned`, the last full plan's counts; lowest priority
    first), then free capacity, then lower-priority queues (down to their minimums, lowest
    priority first); nothing else changes. A higher or equal priority gives nothing, not
    even a spare (issue 19: slots move to a burst only from lower priorities), except that a
    queue with no slot takes one slot of an equal priority in `idle` (nothing waiting,
    nothing running; `idle_donor`)."""
    capacities = {h.host: max(h.capacity_slots, 0) for h in hosts if h.alive}
    alive = SlotMap(hosts={h: s for h, s in current.hosts.items() if h in capacities})
    planned = {name: count for name, count in alive.counts().items() if name in queues}
    free = sum(capacities.values()) - sum(alive.counts().values())
    # Spares first, as the full plan takes them: a burst that spawned into free capacity
    # left the spares idle beside its new slots until the cut (steady seed 12 with burst
    # checks: 1.8 slots more on average, utilisation 65.5 -> 63.7% against HPA's 69%).
    burst_set = set(bursts)
    spares = {q: max(0, n - last_planned[q]) for q, n in planned.items()
              if last_planned is not None and q in last_planned and q not in burst_set}
    # Sorted once, lowest priority first, each burst walking only those below its own: sorted
    # per burst, 6,800 queues with none beside 3,200 holders took 5.6 s CPU per plan
    # (bench/burst_check_cost.py).
    spare_order = sorted(spares, key=lambda q: (queues[q].priority, q))
    donor_order = sorted((q for q in planned if q not in burst_set), key=lambda q: (queues[q].priority, q))
    idle_by_priority: dict[int, list[str]] = {}
    for q in set(idle) - burst_set:
        if q in queues:
            idle_by_priority.setdefault(queues[q].priority, []).append(q)
    wanted: dict[str, int] = {}
    for name in bursts:
        config = queues[name]
        now = planned.get(name, 0)
        if not outlasts_noise(stats.get(name, NO_STATS), now):
            wanted[name] = now  # looked at again at the next check, against the same plan
            continue
        # On an assumed job time for a queue never measured that has a slot (issue 28: a cold
        # queue's burst). A queue with none gets one to measure with, as before: assumed,
        # priority_storm's bulk_mail (from 0 slots, jobs of 1.5 s) grew in small steps on
        # 0.1 s and waited 9.6 s at p99 against 5.5 s (seed 12).
        demand = queue_demand(stats.get(name, NO_STATS), batch_size=config.batch_size,
                              current_slots=now, target_load=target_load, priority=config.priority,
                              assume=now > 0)
        wanted[name] = desired_count(now, demand.slots, priority=config.priority,
                                     min_slots=config.min_slots, max_slots=config.max_slots,
                                     target_load=target_load,
                                     window_slots=window_slot_count(stats.get(name, NO_STATS)))
        grow = max(0, wanted[name] - now)
        from_spares = 0
        for holder in spare_order:
            if queues[holder].priority >= config.priority or from_spares >= grow:
                break
            give = min(grow - from_spares, spares[holder])
            spares[holder] -= give
            planned[holder] -= give
            from_spares += give
        grow -= from_spares
        from_free = min(grow, max(free, 0))
        free -= from_free
        grow -= from_free
        taken = 0
        for donor in donor_order:
            if queues[donor].priority >= config.priority or taken >= grow:
                break
            give = min(grow - taken, max(0, planned[donor] - queues[donor].min_slots))
            planned[donor] -= give
            taken += give
        planned[name] = now + from_spares + from_free + taken
        if planned[name] == 0 and wanted[name] > 0:
            idle_queue = idle_donor(planned, queues, stats, config.priority,
                                    idle_by_priority.get(config.priority, ()))
            if idle_queue is not None:
                planned[idle_queue] -= 1
                planned[name] = 1
    new_map, moves = place(
        current, capacities, planned,
        priorities={q: c.priority for q, c in queues.items()},
        max_slots={q: c.max_slots for q, c in queues.items()},
        spares_first=True,
    )
    counts = new_map.counts()
    plans = {
        name: QueuePlan(queue=name, priority=queues[name].priority, load=0.0, demand_slots=0.0,
                        desired_slots=wanted[name], planned_slots=planned[name],
                        slots=counts.get(name, 0))
        for name in bursts
    }
    return Plan(slot_map=new_map, queues=plans, moves=tuple(moves))


def anything_to_take(
    current: SlotMap,
    queues: Mapping[str, QueueConfig],
    hosts: Sequence[HostCapacity],
    bursts: Sequence[str],
    *,
    last_planned: Mapping[str, int] | None = None,
    idle: Collection[str] = (),
) -> bool:
    """Whether `plan_burst` could give any of `bursts` a slot: a free one on a live host, a
    queue not bursting of lower priority than the most important burst with slots above its
    minimum or above `last_planned` (a spare), or, for a burst with no slot, a queue of its
    priority in `idle` above its minimum. False: the plan would move nothing, and is not made.
    A queue with jobs and no slot bursts at every check (`bursting`), even when busy queues of
    higher or equal priority hold every slot: 6,800 of them beside 3,200 holders planned for
    85 ms CPU per check (0.25 s) to move nothing (bench/burst_check_cost.py). One pass over
    the slot counts; True may still plan no move (a backlog short of `outlasts_noise`)."""
    if not bursts:
        return False
    capacities = {h.host: max(h.capacity_slots, 0) for h in hosts if h.alive}
    counts = SlotMap(hosts={h: s for h, s in current.hosts.items() if h in capacities}).counts()
    if sum(capacities.values()) > sum(counts.values()):
        return True
    burst_set = set(bursts)
    top = max(queues[q].priority for q in bursts)
    idle_set = set(idle) - burst_set
    idle_priorities: set[int] = set()
    for name, count in counts.items():
        config = queues.get(name)
        if config is None or name in burst_set:
            continue
        above_min = count > max(config.min_slots, 0)
        spare = last_planned is not None and name in last_planned and count > last_planned[name]
        if config.priority < top and (above_min or spare):
            return True
        if above_min and name in idle_set:
            idle_priorities.add(config.priority)
    return any(counts.get(q, 0) == 0 and queues[q].priority in idle_priorities for q in bursts)


def idle_donor(
    planned: Mapping[str, int], queues: Mapping[str, QueueConfig], stats: Mapping[str, QueueStats],
    priority: int, idle: Collection[str],
) -> str | None:
    """The queue of `priority` in `idle` that gives a queue with none its first slot: the one
    with the least busy time in the window, above its minimum. Its slots have nothing to do;
    held for its own return, 36 of 60 queues with work waited for the next full plan (up to
    5 s) beside 24 of them idle."""
    donors = [q for q in sorted(idle) if q in queues and queues[q].priority == priority
              and planned.get(q, 0) > max(queues[q].min_slots, 0)]
    return min(donors, key=lambda q: (stats.get(q, NO_STATS).busy_s, q), default=None)
