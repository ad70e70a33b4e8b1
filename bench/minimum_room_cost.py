"""CPU time of the room made for the configured minimums on load-capped hosts
(manager/planning/minimum_room.py `host_capacities`), beside the full plan it feeds (pure; the
manager's planning inputs built here, no processes).

A master over its load limit reports fewer slots than its memory holds, down to
`min_slots_under_load` (1). The manager then raises each capped host, one slot at a time, until
the hosts hold every queue's minimum (and one slot per queue with waiting jobs), up to each
host's memory and max_slots ceiling. It runs in every full plan and in every burst check that
finds a burst (manager/service.py). The cluster here is that case at its hottest: every host
capped at 1 slot, every queue `min_slots = 1` with waiting jobs, the ceilings roomy enough
for every minimum (CEILING slots per host), so the hosts are raised by queues - hosts slots.
Timed: `host_capacities` alone, and one full plan as the manager makes it
(`host_capacities`, `check_inputs`, `planner.plan`); printed: CPU ms (process time, median of
the rounds) per tree, the room's share of the full plan, and new / base.

    .venv/bin/python bench/minimum_room_cost.py [--base main] [--rounds 5] [--scales 1000,10000]

With --base, the base commit's tree (git archive) runs this same file as `--tree DIR --json`,
so the file must import only what every tree has.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pure_ab import arguments, figures_by_tree, print_ratios, timed  # bench/, beside this file

HERE = Path(__file__).resolve()
# Slots each host's memory and max_slots allow; the load caps it at CAPPED.
CEILING = 150
CAPPED = 1
# name: (queues, hosts)
SCALES = {"1000": (1_000, 10), "10000": (10_000, 100)}


def cluster(queues_n: int, hosts_n: int) -> dict[str, Any]:
    """Every queue owed its one minimum slot; every host capped by load at CAPPED slots."""
    from config.models import QueueConfig
    from manager.storage.model import QueueStats, SlotMap

    rng = random.Random(11)
    queues: dict[str, QueueConfig] = {}
    stats: dict[str, QueueStats] = {}
    waiting: dict[str, int] = {}
    for n in range(queues_n):
        name = f"q{n:05d}"
        queues[name] = QueueConfig(priority=rng.randint(0, 9), min_slots=1, max_slots=50)
        waiting[name] = rng.randint(1, 200)
        stats[name] = QueueStats(waiting_jobs=waiting[name], jobs_done=rng.randint(0, 500),
                                 busy_s=rng.uniform(0, 60), slot_lifetime_s=60.0)
    names = list(queues)
    hosts = [f"host{n:03d}" for n in range(hosts_n)]
    # Only what host_capacities reads from a report.
    reports = {h: SimpleNamespace(capacity=CAPPED, capacity_by_memory=CEILING, max_slots=CEILING + 50)
               for h in hosts}
    current = SlotMap(hosts={h: {f"{h}-0": names[i % queues_n]} for i, h in enumerate(hosts)})
    return {"queues": queues, "stats": stats, "waiting": waiting, "hosts": hosts,
            "reports": reports, "current": current}


def room(c: dict[str, Any]) -> int:
    """The manager's capacities for a full plan; returns the slots they hold."""
    from manager.planning.minimum_room import host_capacities

    lifted = host_capacities(c["reports"], c["hosts"], c["queues"], c["queues"], c["waiting"])
    return sum(h.capacity_slots for h in lifted)


def full_plan(c: dict[str, Any]) -> int:
    """manager/service.py's full plan, pure part: capacities, checked inputs, the plan."""
    from manager.planning import planner
    from manager.planning.minimum_room import host_capacities
    from manager.planning.plan_guard import check_inputs

    capacities = host_capacities(c["reports"], c["hosts"], c["queues"], c["queues"], c["waiting"])
    checked = check_inputs(c["stats"], capacities)
    result = planner.plan(c["current"], c["queues"], checked.stats, checked.hosts, target_load=0.8)
    return len(result.moves)


def measure(scales: list[str], rounds: int) -> dict[str, dict[str, float]]:
    figures = {}
    for scale in scales:
        c = cluster(*SCALES[scale])
        full_plan(c)  # the imports, untimed
        room_ms, slots = timed(lambda c=c: room(c), rounds)
        plan_ms, moves = timed(lambda c=c: full_plan(c), rounds)
        figures[scale] = {"room_ms": room_ms, "slots": slots, "plan_ms": plan_ms, "moves": moves}
    return figures


def main() -> int:
    args = arguments(HERE, __doc__, "1000,10000")
    trees = figures_by_tree(HERE, args, measure, prefix="minimum-room-")
    if trees is None:
        return 0
    scales = args.scales.split(",")
    print("| tree | queues / hosts (capped at / ceiling) | slots after room | room CPU ms | "
          "full plan CPU ms (moves) | room / full plan |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for label, figures in trees.items():
        for scale, f in figures.items():
            queues_n, hosts_n = SCALES[scale]
            print(f"| {label} | {queues_n:,} / {hosts_n} ({CAPPED} / {CEILING}) | {f['slots']:,.0f} | "
                  f"{f['room_ms']:.1f} | {f['plan_ms']:.0f} ({f['moves']:,.0f}) | "
                  f"{f['room_ms'] / f['plan_ms']:.0%} |")
    print_ratios(trees, scales, "room_ms", "room")
    return 0


if __name__ == "__main__":
    sys.exit(main())
