"""What a simulation run reports, and how it prints: per-queue waits and backlog, moves, use."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class QueueResult:
    """Waits count every job that arrived: one still waiting at the end counts its wait so far."""

    queue: str
    priority: int
    jobs: int
    done: int
    wait_p50_s: float
    wait_p95_s: float
    wait_p99_s: float
    backlog_mean: float
    backlog_max: int
    backlog_end: int
    slots_mean: float


@dataclass(frozen=True, slots=True)
class SimResult:
    policy: str
    queues: Mapping[str, QueueResult]
    moves: Mapping[str, int]  # retarget / spawn / stop
    utilisation: float  # busy slot-seconds over alive slot-seconds
    slots_mean: float
    plan_cpu_ms_mean: float
    burst_moves: int = 0  # of the moves, those made by burst plans between full plans

    @property
    def total_moves(self) -> int:
        return sum(self.moves.values())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["queues"] = {q: asdict(r) for q, r in self.queues.items()}
        data["moves"] = dict(self.moves)
        return data


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending sequence (0.0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def format_run(name: str, results: Sequence[SimResult]) -> str:
    """Per queue and policy: waits, backlog, slots; then per policy: moves and utilisation."""
    lines = [
        f"scenario {name}",
        "",
        "| queue | prio | policy | jobs | p50 s | p95 s | p99 s | backlog mean | backlog max "
        "| slots mean |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    queues = sorted(results[0].queues.values(), key=lambda r: (-r.priority, r.queue))
    for queue in queues:
        for result in results:
            r = result.queues[queue.queue]
            lines.append(
                f"| {r.queue} | {r.priority} | {result.policy} | {r.jobs:,} | "
                f"{r.wait_p50_s:.2f} | {r.wait_p95_s:.2f} | {r.wait_p99_s:.2f} | "
                f"{r.backlog_mean:.1f} | {r.backlog_max:,} | {r.slots_mean:.1f} |"
            )
    lines += [
        "",
        "| policy | retargets | spawns | stops | moves | utilisation | slots mean | plan ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in results:
        lines.append(
            f"| {result.policy} | {result.moves['retarget']:,} | {result.moves['spawn']:,} | "
            f"{result.moves['stop']:,} | {result.total_moves:,} | {result.utilisation:.0%} | "
            f"{result.slots_mean:.1f} | {result.plan_cpu_ms_mean:.2f} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The planner's promise in one scenario: best high-priority p99, fewer moves than HPA."""

    p99_beats_baselines: bool
    fewer_moves_than_hpa: bool

    @property
    def holds(self) -> bool:
        return self.p99_beats_baselines and self.fewer_moves_than_hpa


def verdict(results: Sequence[SimResult], high_queue: str) -> Verdict:
    by_policy = {r.policy: r for r in results}
    planner = by_policy["planner"]
    p99 = planner.queues[high_queue].wait_p99_s
    others = [r for r in results if r.policy != "planner"]
    return Verdict(
        p99_beats_baselines=all(p99 < r.queues[high_queue].wait_p99_s for r in others),
        fewer_moves_than_hpa=planner.total_moves < by_policy["hpa"].total_moves,
    )


def summary_header() -> list[str]:
    return [
        "| scenario | policy | high queue p50 / p95 / p99 wait s | worst other p99 s "
        "| moves (r/s/x) | utilisation | promise |",
        "| --- | --- | --- | ---: | --- | ---: | --- |",
    ]


def summary_rows(name: str, results: Sequence[SimResult], high_queue: str) -> list[str]:
    check = verdict(results, high_queue)
    rows = []
    for result in results:
        high = result.queues[high_queue]
        worst = max(
            (r.wait_p99_s for q, r in result.queues.items() if q != high_queue), default=0.0
        )
        promise = ""
        if result.policy == "planner":
            promise = "holds" if check.holds else (
                f"p99 best: {check.p99_beats_baselines}, "
                f"fewer moves: {check.fewer_moves_than_hpa}"
            )
        rows.append(
            f"| {name} | {result.policy} | {high.wait_p50_s:.2f} / {high.wait_p95_s:.2f} / "
            f"{high.wait_p99_s:.2f} | {worst:.1f} | {result.moves['retarget']}/"
            f"{result.moves['spawn']}/{result.moves['stop']} = {result.total_moves} | "
            f"{result.utilisation:.0%} | {promise} |"
        )
    return rows
