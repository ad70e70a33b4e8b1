"""`slotmap simulate SCENARIO`: run the planner and the two baselines on one scenario file."""
from __future__ import annotations

import argparse
import json
from typing import Any

from manager.simulator.baselines import HpaPolicy, StaticPolicy
from manager.simulator.policy import MANAGER_BURST_CHECK_S, PlannerPolicy
from manager.simulator.report import format_run, summary_header, summary_rows, verdict
from manager.simulator.scenario import load_scenario
from manager.simulator.simulate import simulate


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="simulate a cluster in virtual time: the planner against static and HPA-style slots",
        description=__doc__,
    )
    parser.add_argument("scenario", metavar="SCENARIO", help="scenario file (TOML)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    parser.add_argument("--burst-check", type=float, default=MANAGER_BURST_CHECK_S, metavar="S",
                        help="the manager's burst check every S seconds of virtual time "
                             f"(default: the manager's, {MANAGER_BURST_CHECK_S:g}; 0: full plans alone)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    if args.seed is not None:
        scenario = scenario.model_copy(update={"seed": args.seed})
    results = simulate(
        scenario, [PlannerPolicy(scenario, burst_check_s=args.burst_check), StaticPolicy(scenario),
                   HpaPolicy(scenario)]
    )
    high = scenario.high_priority_queue()
    if args.json:
        check = verdict(results, high)
        print(json.dumps({
            "scenario": scenario.name,
            "seed": scenario.seed,
            "high_priority_queue": high,
            "results": [r.to_json() for r in results],
            "promise": {
                "p99_beats_baselines": check.p99_beats_baselines,
                "fewer_moves_than_hpa": check.fewer_moves_than_hpa,
            },
        }, indent=2))
        return 0
    print(format_run(scenario.name, results))
    print()
    print("\n".join(summary_header() + summary_rows(scenario.name, results, high)))
    return 0
