"""CPU time of one burst check, and of one full plan, when many queues have jobs and no slot
and nothing can be taken (pure; the manager's planning inputs built here, no processes).

Since plannerq (cdcd530) a queue with jobs and no slot is a burst at every check
(`burst_check_s`, 0.25 s by default), not only when its backlog appeared: each check plans
while any such queue waits, even when every slot is held by a busy queue of higher or equal
priority, no spare, no free slot, no idle donor. The cluster here is that case: hosts full of
busy holders (priority 5-9, two slots or more each), the other queues (priority 0-5) with 50
jobs each and no slot, the waiting counts unchanged since the last plan. Timed: the pure part
of the manager's check (manager/service.py `plan_burst`: `bursting`, then for what it finds
`check_inputs` and `plan_burst`; the queue server read, the masters' stats and the host
capacities are left out) and `planner.plan` on the same inputs. Printed: CPU ms (process
time, median of the rounds) per tree, the share of a core a check takes at burst_check_s,
the burst plan's own cost where the tree would skip it (`anything_to_take`), the settings in
force read from a report per host naming every queue (manager/service.py read them before a
burst plan, now only when there is something to take), and new / base.

    .venv/bin/python bench/burst_check_cost.py [--base 317eaf5] [--rounds 5] [--scales 150,1000,10000]

With --base, the base commit's tree (git archive) runs this same file as `--tree DIR --json`,
so the file must import only what every tree has.
"""
from __future__ import annotations

import inspect
import random
import sys
from pathlib import Path
from typing import Any

from pure_ab import arguments, figures_by_tree, print_ratios, timed  # bench/, beside this file

HERE = Path(__file__).resolve()
BURST_CHECK_S = 0.25  # config/models.py's default
# name: (queues, hosts, slots per host)
SCALES = {"150": (150, 40, 88), "1000": (1_000, 10, 64), "10000": (10_000, 100, 64)}


def cluster(queues_n: int, hosts_n: int, per_host: int) -> dict[str, Any]:
    """Busy holders fill every slot; every other queue waits with no slot and takes nothing."""
    from config.models import QueueConfig
    from manager.storage.model import HostCapacity, QueueStats, SlotMap

    rng = random.Random(7)
    total = hosts_n * per_host
    holders_n = min(queues_n // 3, total // 2)
    queues: dict[str, QueueConfig] = {}
    stats: dict[str, QueueStats] = {}
    waiting: dict[str, int] = {}
    holder_names = [f"h{n:05d}" for n in range(holders_n)]
    for name in holder_names:
        queues[name] = QueueConfig(priority=rng.randint(5, 9), min_slots=1, max_slots=total)
        waiting[name] = rng.randint(1, 200)  # busy: never an idle donor
        stats[name] = QueueStats(waiting_jobs=waiting[name], jobs_done=rng.randint(100, 5000),
                                 busy_s=rng.uniform(100, 600), slot_lifetime_s=600.0)
    for n in range(queues_n - holders_n):
        name = f"s{n:05d}"
        queues[name] = QueueConfig(priority=rng.randint(0, 5), min_slots=0, max_slots=50)
        waiting[name] = 50
        # Half remembered a job time (known_job_s), half never ran a job.
        stats[name] = QueueStats(waiting_jobs=50, known_job_s=1.0 if n % 2 else 0.0)
    hosts = [HostCapacity(f"host{n:03d}", per_host) for n in range(hosts_n)]
    assignments: dict[str, dict[str, str]] = {h.host: {} for h in hosts}
    slot = 0
    for host in hosts:
        for _ in range(per_host):
            assignments[host.host][f"{host.host}-{slot}"] = holder_names[slot % holders_n]
            slot += 1
    current = SlotMap(hosts=assignments)
    return {"queues": queues, "stats": stats, "waiting": waiting, "hosts": hosts, "current": current}


def one_check(c: dict[str, Any], *, skip: bool = True) -> int:
    """The pure part of manager/service.py's plan_burst; returns the moves (0: nothing taken).
    skip=False: the burst plan made even where the tree skips it (`anything_to_take`)."""
    from manager.planning import burst
    from manager.planning.plan_guard import check_inputs

    current = c["current"]
    counts = current.counts()
    found = burst.bursting(c["waiting"], c["waiting"], c["queues"], counts)
    if not found:
        return 0
    extra = {}
    if "idle" in inspect.signature(burst.plan_burst).parameters:
        extra["idle"] = [q for q, n in c["waiting"].items() if n == 0 and counts.get(q, 0) == 0]
    anything = getattr(burst, "anything_to_take", None)
    if skip and anything is not None and not anything(current, c["queues"], c["hosts"], found,
                                                      last_planned=counts, **extra):
        return 0
    checked = check_inputs(c["stats"], c["hosts"])
    result = burst.plan_burst(current, c["queues"], checked.stats, checked.hosts, found,
                              target_load=0.8, last_planned=counts, **extra)
    return len(result.moves)


def reports(c: dict[str, Any]) -> list[Any]:
    """A report per host, each naming every queue's settings in force (only what
    settings_in_force reads)."""
    from types import SimpleNamespace

    from master.report import QueueSettingsReport

    settings = {q: QueueSettingsReport(batch_size=10, batch_size_source="config", handler="h") for q in c["queues"]}
    return [SimpleNamespace(queue_settings=settings) for _ in c["hosts"]]


def settings_read(reported: list[Any]) -> int:
    """manager/storage/stats.py's settings_in_force: the manager read it at every check with a
    burst before it planned."""
    from manager.storage.stats import settings_in_force

    return len(settings_in_force(reported))


def one_plan(c: dict[str, Any]) -> int:
    from manager.planning import planner

    result = planner.plan(c["current"], c["queues"], c["stats"], c["hosts"], target_load=0.8)
    return len(result.moves)


def measure(scales: list[str], rounds: int) -> dict[str, dict[str, float]]:
    figures = {}
    for scale in scales:
        c = cluster(*SCALES[scale])
        from manager.planning import burst

        found = burst.bursting(c["waiting"], c["waiting"], c["queues"], c["current"].counts())
        check_ms, check_moves = timed(lambda c=c: one_check(c), rounds)
        burst_plan_ms, _ = timed(lambda c=c: one_check(c, skip=False), rounds)
        plan_ms, plan_moves = timed(lambda c=c: one_plan(c), rounds)
        reported = reports(c)
        settings_ms, _ = timed(lambda reported=reported: settings_read(reported), max(1, rounds // 3))
        figures[scale] = {"check_ms": check_ms, "burst_plan_ms": burst_plan_ms, "check_moves": check_moves, "bursting": len(found),
                          "plan_ms": plan_ms, "plan_moves": plan_moves, "settings_ms": settings_ms}
    return figures


def main() -> int:
    args = arguments(HERE, __doc__, "150,1000,10000")
    trees = figures_by_tree(HERE, args, measure, prefix="burst-cost-")
    if trees is None:
        return 0
    scales = args.scales.split(",")
    print("| tree | queues / hosts / slots | bursting | check CPU ms | share of a core at "
          f"{BURST_CHECK_S:g} s | check moves | burst plan, never skipped, CPU ms | full plan CPU ms | plan moves | settings in force ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, figures in trees.items():
        for scale, f in figures.items():
            queues_n, hosts_n, per_host = SCALES[scale]
            share = f["check_ms"] / 1000 / BURST_CHECK_S
            print(f"| {label} | {queues_n:,} / {hosts_n} / {hosts_n * per_host:,} | {f['bursting']:.0f} | "
                  f"{f['check_ms']:.1f} | {share:.1%} | {f['check_moves']:.0f} | {f['burst_plan_ms']:.1f} | "
                  f"{f['plan_ms']:.0f} | "
                  f"{f['plan_moves']:.0f} | {f['settings_ms']:.0f} |")
    print_ratios(trees, scales, "check_ms", "check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
