"""The slot planner (pure: no I/O, no clock): current map, queue config, window stats, hosts -> plan.

The formula and its reasons are in docs/DESIGN.md ("The slot planner as built").
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from config.models import QueueConfig
from manager.planning.placement import place
from manager.planning.settle import MAX_HELD_LOAD, settle
from manager.planning.shares import EPSILON_SLOTS, Turn, allocate
from manager.storage.model import HostCapacity, Plan, QueuePlan, QueueStats, SlotMap

# Dead band, as a fraction of the current slot count. Up: 30% at priority 0, narrowing as
# 0.3 / (1 + priority), never below 2%. Down: 30% whatever the priority.
BASE_BAND = 0.3
MIN_BAND = 0.02
DOWN_BAND = 0.3
# Slots kept above plan, idle and warm, in all: when more than this share of the cluster's
# capacity, all but (1 - DOWN_BAND) of that share stop. Keeping every one left utilisation
# 6-18 points below HPA's (bursty, diurnal, priority_storm: a burst's or a peak's slots
# stayed idle for the rest of the hour). Cutting to the share itself, with no band, took
# a slot at each plan whose demand dipped (the count followed the plan + the share down).
# Small, because manager/planning/stabilise.py already keeps what a queue was planned over the
# last 5 minutes out of the cut: with it, 3% met issue 19's goals in 18 of 20 simulator
# runs, 5% in 17, 8% in 16 (steady's utilisation), for 4-19% more moves than 8%.
SPARE_SHARE = 0.03
# A backlog's slots scale with the count now over the window's average count (growth
# compounds while jobs wait), but by at most this much: uncapped, a priority-9 burst of
# 8 busy slots took 33 (priority_storm's api_hooks), each one a retarget there and back.
COMPOUND_CAP = 1.5
# Not for a saturated queue (the window's idle slot-seconds, spread over the slots now, at
# most this share of the window): its backlog compounds on the count now, as the average
# lags a flood seconds old (priority_storm with burst plans: bulk_mail held at 52 slots for
# 20 s, backlog 284 -> 832). api_hooks' burst left 10-30% idle per slot: capped.
SATURATED_IDLE = 0.05
NO_STATS = QueueStats()


@dataclass(frozen=True, slots=True)
class Demand:
    load: float
    slots: float
    # The slots that just keep up (no headroom, no urgency): when the cluster is short, every
    # queue gets this before any queue gets headroom.
    need_slots: float = 0.0


def band_fraction(priority: int) -> float:
    """Relative upward dead band: wide for unimportant queues, narrow for important ones."""
    return max(MIN_BAND, BASE_BAND / (1 + max(priority, 0)))


def up_band(priority: int, target_load: float) -> float:
    """The upward dead band the planner uses: band_fraction, narrowed so that a queue held
    at its count never runs above MAX_HELD_LOAD."""
    return max(MIN_BAND, min(band_fraction(priority), MAX_HELD_LOAD / target_load - 1))


def backlog_urgency(priority: int) -> float:
    """How many windows' worth of slots a backlog asks for: 1 + priority, within 1 .. 15.

    A queue wants its waiting jobs started within window / urgency: a minute at priority 0,
    6 s at priority 9. Same shape as the dead band: important queues react sooner.
    """
    return BASE_BAND / band_fraction(priority)


# The job time assumed for a queue that never ran a job while waiting jobs ask for slots
# (issue 28): without one, a cold queue's demand read as one slot until a slot had finished
# a batch and a master had reported it, and a full plan in between took the burst for
# planned (4,000 jobs of 20 ms stayed at 1 slot for 6.3 s). 0.1 s makes a backlog of 20
# jobs on one slot a burst (BURST_DRAIN_S, 2 s); the first batch measured corrects it.
ASSUMED_JOB_S = 0.1


def job_time_s(stats: QueueStats, *, assume: bool = True) -> float | None:
    """Mean processing time of one job: measured in the window; else remembered from before
    it (`known_job_s`); else, with `assume`, ASSUMED_JOB_S while jobs wait; else None."""
    if stats.jobs_done > 0:
        return stats.busy_s / stats.jobs_done
    if stats.busy_s > 0:
        # A job has been running this long and has not finished: a lower bound.
        return max(stats.busy_s, stats.known_job_s)
    if stats.known_job_s > 0:
        return stats.known_job_s
    if stats.waiting_jobs > 0 and assume:
        return ASSUMED_JOB_S
    return None


def queue_demand(
    stats: QueueStats,
    *,
    batch_size: int,
    current_slots: int,
    target_load: float,
    priority: int = 0,
    assume: bool = False,
) -> Demand:
    """Load of a queue over the window, and the slots that would run it at target_load.

    load = (busy + backlog time) / slot lifetime. Slots = (busy slots on average over the
    window + current x backlog time / slot lifetime) / target, where current is the larger
    of the slots now and their average over the window (a queue that just lost slots is not
    judged by its reduced count), capped at COMPOUND_CAP x that average unless the queue is
    saturated. For the slot count the backlog weighs
    backlog_urgency(priority) times: important queues clear it sooner.

    A queue with jobs waiting and no work in the window keeps at least what runs (one slot
    at least), whatever its remembered or assumed job time says. `assume`: a queue never
    measured is planned on ASSUMED_JOB_S (burst plans, manager/planning/burst.py); without it, on
    what runs. In full plans the assumption cost priority_storm's bulk_mail 5.5 -> 9.6 s at
    p99 (seed 12; 6.5 s with it in burst plans alone), and a full plan comes after the burst
    check has grown a cold queue.
    """
    demand = _window_demand(stats, batch_size=batch_size, current_slots=current_slots,
                            target_load=target_load, priority=priority, assume=assume)
    if stats.jobs_done == 0 and stats.busy_s == 0 and stats.waiting_jobs > 0:
        # No work measured in the window: the job time is remembered or assumed. It may grow
        # the queue, never shrink it below what runs (and one slot to measure with): an
        # assumed 0.1 s against jobs of 1.5 s shrank priority_storm's other queues at each
        # plan and left bulk_mail at 9.6 s p99 against 5.5 s (seed 12).
        floor = float(max(current_slots, 1))
        return Demand(load=demand.load, slots=max(demand.slots, floor),
                      need_slots=max(demand.need_slots, 1.0))
    return demand


def _window_demand(
    stats: QueueStats,
    *,
    batch_size: int,
    current_slots: int,
    target_load: float,
    priority: int = 0,
    assume: bool = False,
) -> Demand:
    """The window's demand: queue_demand without the floor of an unmeasured queue."""
    job_s = job_time_s(stats, assume=assume)
    if job_s is None:
        return Demand(load=0.0, slots=0.0, need_slots=0.0)  # nothing ran, nothing waits
    backlog_s = stats.waiting_jobs * job_s
    urgent_backlog_s = backlog_s * backlog_urgency(priority)
    window_s = max(stats.window_s, EPSILON_SLOTS)
    # A batch goes to one slot: a backlog of n jobs keeps at most ceil(n / batch) slots busy.
    batches = float(math.ceil(stats.waiting_jobs / batch_size))
    if stats.slot_lifetime_s <= 0:
        # Work without slot lifetime (slots that died uncounted): per-window slot-seconds.
        load = math.inf if stats.busy_s + backlog_s > 0 else 0.0
        need = stats.busy_s / window_s + min(backlog_s / window_s, batches)
        slots = (stats.busy_s / window_s + min(urgent_backlog_s / window_s, batches)) / target_load
        return Demand(load=load, slots=slots, need_slots=need)
    load = (stats.busy_s + backlog_s) / stats.slot_lifetime_s
    current = max(float(current_slots), stats.slot_lifetime_s / window_s)
    if not saturated(stats, current_slots):
        current = min(current, COMPOUND_CAP * max(stats.slot_lifetime_s / window_s, 1.0))
    # The slots that were busy on average over the window, not the count now times the
    # window's busy share: right after growth that share was measured on fewer slots, and
    # with no backlog left it compounded the growth plan after plan (steady: reports grew
    # 17 -> 36 in 15 s for 15 busy slots, thumbnails 16 -> 24). A backlog still compounds
    # (below): waiting jobs are what shows a saturated queue's excess.
    busy_slots = stats.busy_s / window_s
    backlog_slots = min(current * urgent_backlog_s / stats.slot_lifetime_s, batches)
    need = busy_slots + min(current * backlog_s / stats.slot_lifetime_s, batches)
    return Demand(load=load, slots=(busy_slots + backlog_slots) / target_load, need_slots=need)


def saturated(stats: QueueStats, current_slots: int) -> bool:
    """Whether the window's idle slot-seconds, spread over the slots now, are at most
    SATURATED_IDLE of the window: every slot has been busy since it came."""
    idle_s = max(stats.slot_lifetime_s - stats.busy_s, 0.0)
    return current_slots > 0 and idle_s <= SATURATED_IDLE * current_slots * stats.window_s


def window_slot_count(stats: QueueStats) -> float:
    """Average slot count over the window (inf when the window is empty: nothing to lag)."""
    if stats.window_s <= 0:
        return math.inf
    return stats.slot_lifetime_s / stats.window_s


def desired_count(
    current_slots: int, demand_slots: float, *, priority: int, min_slots: int, max_slots: int,
    target_load: float, window_slots: float = math.inf,
) -> int:
    """Slots a queue should have, from its current count: no change inside the dead band.

    window_slots: the queue's average slot count over the window (slot lifetime / window).
    """
    frac = band_fraction(priority)
    # Any demand above max_slots means max_slots; this also tames inf from a tiny lifetime.
    demand_slots = min(demand_slots, max_slots + 1.0)
    upper = current_slots * (1 + up_band(priority, target_load))
    # Down, every queue keeps the widest band: giving a slot back on a quiet minute only to
    # take it again the next is churn, and in a full cluster each give-back is a move.
    # Measured from one slot below: right after rounding up, demand sits within 1 of count.
    lower = (current_slots - 1) * (1 - max(frac, DOWN_BAND))
    if demand_slots <= 0:
        target = 0
    elif lower <= demand_slots <= upper or (
        demand_slots < lower and window_slots < current_slots * (1 - DOWN_BAND)
    ):
        # Below the band, a queue whose window mostly saw fewer slots than it has now (it
        # grew within the window) keeps them until the window has seen them busy or idle: its
        # window average lags a burst that is still on (priority_storm: api_hooks went
        # 8 -> 33 -> 4 -> 11 slots in 15 s, each step a round of retargets).
        target = current_slots
    else:
        target = math.ceil(demand_slots - EPSILON_SLOTS)
    return max(min_slots, min(max_slots, target))


def headroom_share(priority: int) -> float:
    """The part of a queue's headroom that comes with its need in a short cluster: none at
    priority 0, 6/7 at 6, 9/10 at 9 (the dead band's shape again)."""
    return 1.0 - band_fraction(priority) / BASE_BAND


def capacity_tiers(
    desired: Mapping[str, int], demands: Mapping[str, Demand], queues: Mapping[str, QueueConfig],
    *, target_load: float,
) -> list[dict[str, int]]:
    """What a short cluster fills first, tier by tier: what keeps each queue up (plus most
    of an important queue's headroom; shared by priority weight), then everyone's headroom
    (shared evenly, by the slots missing: EVEN_TIER), then (allocate) the urgency that
    clears a backlog faster.

    The headroom tier is even: by weight, all of it went to the higher priorities before a
    priority-0 queue got any (hosts_lost: 16 of 20 runs meet every goal by weight, 17 even).

    Before, one priority-weighted share of the whole desired count let important queues'
    backlog urgency (x10 at priority 9) take what the low priorities needed to keep up: with
    2 of 10 hosts lost, the worst low-priority queue waited 43 s at p99 against 2.3 s under a
    static map (bench/simulate_all.py, hosts_lost)."""
    first: dict[str, int] = {}
    steady: dict[str, int] = {}
    for name, count in desired.items():
        need = min(float(count), demands[name].need_slots)
        calm = min(float(count), need / target_load)
        share = headroom_share(queues[name].priority)
        first[name] = math.ceil(need + share * (count - need) - EPSILON_SLOTS)
        steady[name] = math.ceil(calm - EPSILON_SLOTS)
    return [first, steady]


def window_seen(stats: Mapping[str, QueueStats], full_window_s: float | None) -> bool:
    """Whether the stats cover the whole configured window (unknown: assumed so)."""
    if full_window_s is None or not stats:
        return True
    return min(s.window_s for s in stats.values()) >= full_window_s * (1 - EPSILON_SLOTS)


def plan(
    current: SlotMap,
    queues: Mapping[str, QueueConfig],
    stats: Mapping[str, QueueStats],
    hosts: Sequence[HostCapacity],
    *,
    target_load: float,
    full_window_s: float | None = None,
    keep: Mapping[str, int] | None = None,
) -> Plan:
    """The new slot map, built from the current one, with per-queue figures and the moves.

    full_window_s: the configured stats window. While the stats cover less (the manager
    has just started), no spare slot is stopped: a few seconds of work say little about
    the slots a queue will want (steady, seed 12: the first plan, on 5 s, stopped 12 of
    reports' 19 starting slots, and its p99 went 1.3 -> 4.2 s).
    keep: per queue, a count the spare cut stops no slot below (manager/planning/stabilise.py: the
    highest count planned over the last 5 minutes).
    """
    capacities = {h.host: max(h.capacity_slots, 0) for h in hosts if h.alive}
    counts = SlotMap(
        hosts={h: s for h, s in current.hosts.items() if h in capacities}
    ).counts()
    demands: dict[str, Demand] = {}
    desired: dict[str, int] = {}
    for name in sorted(queues):
        config = queues[name]
        demands[name] = queue_demand(
            stats.get(name, NO_STATS),
            batch_size=config.batch_size,
            current_slots=counts.get(name, 0),
            target_load=target_load,
            priority=config.priority,
        )
        desired[name] = desired_count(
            counts.get(name, 0),
            demands[name].slots,
            priority=config.priority,
            min_slots=config.min_slots,
            max_slots=config.max_slots,
            target_load=target_load,
            window_slots=window_slot_count(stats.get(name, NO_STATS)),
        )
    tiers = capacity_tiers(desired, demands, queues, target_load=target_load)
    capacity = sum(capacities.values())
    turns = {q: Turn(need=d.need_slots, served=window_slot_count(stats.get(q, NO_STATS)))
             for q, d in demands.items()}
    planned = allocate(desired, queues, capacity_slots=capacity, tiers=tiers, turns=turns)
    if sum(desired.values()) > capacity:
        planned = settle(planned, counts, desired, queues, capacity_slots=capacity,
                         need={q: d.need_slots for q, d in demands.items()})
    new_map, moves = place(
        current,
        capacities,
        planned,
        priorities={q: c.priority for q, c in queues.items()},
        max_slots={q: c.max_slots for q, c in queues.items()},
        spare_slots=(math.floor(SPARE_SHARE * (1 - DOWN_BAND) * capacity + EPSILON_SLOTS),
                     math.ceil(SPARE_SHARE * capacity - EPSILON_SLOTS))
        if window_seen(stats, full_window_s) else None,
        keep=keep,
    )
    new_counts = new_map.counts()
    queue_plans = {
        name: QueuePlan(
            queue=name,
            priority=queues[name].priority,
            load=demands[name].load,
            demand_slots=demands[name].slots,
            desired_slots=desired[name],
            planned_slots=planned[name],
            slots=new_counts.get(name, 0),
        )
        for name in sorted(queues)
    }
    return Plan(slot_map=new_map, queues=queue_plans, moves=tuple(moves))
