"""`slotmap limiters --config FILE`: each rate limiter's name, rate, permits granted and cuts,
as the pulsar sees them now (the figures a queue's dashboard page needs, for the shell);
`slotmap limiters resume NAME`: an admin lifts a limiter's pause."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping

from slot.pulsar.protocol import LimiterView

EXIT_NO_PULSAR = 1
EXIT_USAGE = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "limiters", help="the cluster's rate limiters: rate in force, permits granted, cuts, pauses"
    )
    parser.add_argument("--config", help="cluster config (TOML): [pulsar] listen and CURVE keys")
    parser.add_argument("--json", action="store_true", help="one JSON object: limiter -> state")
    parser.add_argument("action", nargs="?", choices=["resume"],
                        help="resume NAME: lift the pause of limiter NAME (a queue's name) now")
    parser.add_argument("name", nargs="?", help="the limiter to resume")
    parser.set_defaults(func=run)


def render(limiters: Mapping[str, LimiterView]) -> str:
    """A table, one limiter (= rate-limited queue) a line."""
    if not limiters:
        return "no rate limiters (no queue has a rate_limit)"
    lines = [f"{'limiter':<24} {'rate in force':>14} {'configured':>11} {'granted':>10} "
             f"{'cuts':>5} {'pauses':>6} {'waiting':>7} {'refused':>7}  paused for"]
    for name, view in sorted(limiters.items()):
        paused = f"{view.paused_for_s:.0f} s" if view.paused_for_s > 0 else "-"
        lines.append(f"{name:<24} {view.current_per_s:>12.3g}/s {view.configured_per_s:>9.3g}/s "
                     f"{view.granted_total:>10} {view.cuts:>5} {view.pauses:>6} {view.waiting:>7} "
                     f"{view.refused_places:>7}  {paused}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from config.curve import client_curve
    from config.load import load_config
    from slot.pulsar.client import PermitClient
    from slot.pulsar.errors import PermitError

    if args.action == "resume" and not args.name:
        print("slotmap limiters resume: name the limiter (a rate-limited queue's name)", file=sys.stderr)
        return EXIT_USAGE
    config = load_config(args.config)
    with PermitClient(config.pulsar.listen, curve=client_curve(config)) as client:
        try:
            if args.action == "resume":
                client.resume(args.name)
                print(f"limiter {args.name}: pause lifted")
                return 0
            limiters = client.states()
        except PermitError as exc:
            print(f"slotmap limiters: {exc}", file=sys.stderr)
            return EXIT_NO_PULSAR
    if args.json:
        print(json.dumps({name: view.model_dump() for name, view in limiters.items()}, indent=2))
    else:
        print(render(limiters))
    return 0
