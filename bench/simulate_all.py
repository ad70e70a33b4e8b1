"""Run every scenario in bench/scenarios/ and print the planner-vs-baselines table.

    .venv/bin/python bench/simulate_all.py [--detail] [--extra-seeds 11,12,13]

The promise checked per scenario: the planner's high-priority p99 wait beats both
baselines, with fewer slot moves than the HPA-style rule. --extra-seeds reruns each
scenario with other seeds, so one lucky seed cannot carry the table. Exit 1 if the
promise fails anywhere.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from manager.simulator.baselines import HpaPolicy, StaticPolicy
from manager.simulator.policy import PlannerPolicy
from manager.simulator.report import (
    SimResult,
    format_run,
    summary_header,
    summary_rows,
    verdict,
)
from manager.simulator.scenario import Scenario, load_scenario
from manager.simulator.simulate import simulate

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def worst_other_p99(result: SimResult, high: str) -> float:
    return max((r.wait_p99_s for q, r in result.queues.items() if q != high), default=0.0)


def run(scenario: Scenario) -> list[SimResult]:
    return simulate(
        scenario, [PlannerPolicy(scenario), StaticPolicy(scenario), HpaPolicy(scenario)]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detail", action="store_true", help="per-queue tables too")
    parser.add_argument("--extra-seeds", default="", help="comma-separated seeds to recheck")
    args = parser.parse_args()
    extra_seeds = [int(s) for s in args.extra_seeds.split(",") if s.strip()]
    paths = sorted(SCENARIOS.glob("*.toml"))
    rows, details, checks = [], [], []
    started = time.perf_counter()
    for path in paths:
        scenario = load_scenario(path)
        results = run(scenario)
        high = scenario.high_priority_queue()
        rows += summary_rows(scenario.name, results, high)
        details.append(format_run(scenario.name, results))
        checks.append((scenario.name, scenario.seed, verdict(results, high).holds, results, high))
        for seed in extra_seeds:
            reseeded = scenario.model_copy(update={"seed": seed})
            again = run(reseeded)
            checks.append((scenario.name, seed, verdict(again, high).holds, again, high))
    elapsed_s = time.perf_counter() - started
    print("\n".join(summary_header() + rows))
    print()
    print("moves (r/s/x): retargets / spawns / stops. Waits count jobs still waiting at the end.")
    if extra_seeds:
        print()
        print("| scenario | seed | planner p99 s | static p99 s | hpa p99 s | planner moves "
              "| hpa moves | worst other p99 s (limit) | utilisation (hpa) | promise |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for name, seed, holds, results, high in checks:
            by = {r.policy: r for r in results}
            worst = {p: worst_other_p99(r, high) for p, r in by.items()}
            # Issue 19's further goals, shown, not yet part of the promise: the worst other
            # queue within 1.5x the better baseline's, utilisation within 5 points of HPA's.
            limit = 1.5 * min(worst["static"], worst["hpa"])
            print(
                f"| {name} | {seed} | {by['planner'].queues[high].wait_p99_s:.2f} | "
                f"{by['static'].queues[high].wait_p99_s:.2f} | "
                f"{by['hpa'].queues[high].wait_p99_s:.2f} | {by['planner'].total_moves} | "
                f"{by['hpa'].total_moves} | {worst['planner']:.1f} ({limit:.1f}) | "
                f"{by['planner'].utilisation:.0%} ({by['hpa'].utilisation:.0%}) | "
                f"{'holds' if holds else 'FAILS'} |"
            )
    if args.detail:
        for detail in details:
            print()
            print(detail)
    print()
    print(f"{len(checks)} runs of 3 policies in {elapsed_s:.0f} s")
    return 0 if all(holds for _, _, holds, _, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
