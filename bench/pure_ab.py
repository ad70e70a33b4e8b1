"""The frame of a pure CPU bench run against a base commit: each tree (the base from `git
archive`, then this checkout) runs the same bench file as `--tree DIR --json`, so a bench
using this must import only what every tree has. Used by burst_check_cost.py and
minimum_room_cost.py."""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Figures = dict[str, dict[str, float]]


def timed(work: Callable[[], int], rounds: int) -> tuple[float, int]:
    """Median process-time ms over `rounds` calls, and the last call's result."""
    ms = []
    out = 0
    for _ in range(rounds):
        started = time.process_time()
        out = work()
        ms.append((time.process_time() - started) * 1000)
    return statistics.median(ms), out


def arguments(script: Path, doc: str | None, scales: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", help="a commit to compare with (its tree from git archive)")
    parser.add_argument("--tree", type=Path, default=script.parents[1], help="the tree to import from")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scales", default=scales)
    parser.add_argument("--json", action="store_true", help="this tree's figures as JSON (for --base)")
    return parser.parse_args()


def figures_by_tree(script: Path, args: argparse.Namespace, measure: Callable[[list[str], int], Figures],
                    *, prefix: str) -> dict[str, Figures] | None:
    """{tree label: its figures}, "new" last; None once --json has printed this tree's."""
    scales = args.scales.split(",")
    sys.path.insert(0, str(args.tree))
    if args.json:
        print(json.dumps(measure(scales, args.rounds)))
        return None
    if not args.base:
        return {"new": measure(scales, args.rounds)}
    from base_checkout import code_dirs  # bench/, beside this file

    trees: dict[str, Figures] = {}
    with code_dirs(args.base, prefix=prefix) as dirs:
        for label, tree in dirs.items():
            trees[label] = _run_tree(script, tree, scales, args.rounds)
    return trees


def print_ratios(trees: dict[str, Figures], scales: list[str], measured: str, label: str) -> None:
    """With a base: per scale, new / base of `measured` (ms; labelled `label`) and of the full plan."""
    if len(trees) != 2:
        return
    base, new = trees.values()
    for scale in scales:
        print(f"{scale} queues: {label} new / base {new[scale][measured] / max(base[scale][measured], 1e-3):.3g}x, "
              f"full plan new / base {new[scale]['plan_ms'] / base[scale]['plan_ms']:.3g}x")


def _run_tree(script: Path, tree: Path, scales: list[str], rounds: int) -> Figures:
    out = subprocess.run([sys.executable, str(script), "--tree", str(tree), "--json",
                          "--rounds", str(rounds), "--scales", ",".join(scales)],
                         check=True, capture_output=True, text=True, cwd=tree).stdout
    figures: Any = json.loads(out)
    return figures
