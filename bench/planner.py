"""Planning time at the seed's scale (150 queues, 3,500 slots, 40 hosts) and at 10x.

    .venv/bin/python bench/planner.py [--rounds N]

Cases per scale: a steady replan (noisy stats, a tenth of the queues changing demand),
a cold start (empty map), and 20% of the hosts lost. Targets: < 50 ms and < 1 s per plan.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from config.models import QueueConfig
from manager.planning.planner import plan
from manager.storage.model import HostCapacity, Plan, QueueStats, SlotMap

TARGET_LOAD = 0.8
WINDOW_S = 60.0


@dataclass(frozen=True)
class Scale:
    name: str
    queues: int
    slots: int
    hosts: int
    target_ms: float


SCALES = (
    Scale("seed", queues=150, slots=3_500, hosts=40, target_ms=50.0),
    Scale("10x", queues=1_500, slots=35_000, hosts=400, target_ms=1_000.0),
)


def cluster(scale: Scale, rng: random.Random) -> tuple[dict[str, QueueConfig], list[float]]:
    """Queue configs and busy-slot demands filling about the given slot count at target load."""
    weights = [rng.lognormvariate(0, 1.2) for _ in range(scale.queues)]
    total = sum(weights)
    busy = [w / total * scale.slots * TARGET_LOAD * 0.96 for w in weights]
    queues = {
        f"q{i:04d}": QueueConfig(
            priority=rng.randint(0, 9),
            min_slots=rng.choice((0, 0, 1, 2, 5)),
            max_slots=scale.slots,
            batch_size=rng.choice((1, 10, 50)),
        )
        for i in range(scale.queues)
    }
    return queues, busy


def stats_for(queues: dict[str, QueueConfig], busy: list[float], rng: random.Random,
              *, changed_share: float) -> dict[str, QueueStats]:
    result = {}
    for name, slots in zip(queues, busy, strict=True):
        factor = rng.uniform(0.5, 1.6) if rng.random() < changed_share else rng.uniform(0.97, 1.03)
        busy_s = slots * factor * WINDOW_S
        result[name] = QueueStats(
            waiting_jobs=rng.randint(0, 20),
            jobs_done=max(int(busy_s * 4), 1),
            busy_s=busy_s,
            slot_lifetime_s=busy_s / TARGET_LOAD,
            window_s=WINDOW_S,
        )
    return result


@dataclass(frozen=True)
class Timing:
    wall_ms: list[float]
    cpu_ms: list[float]


def timed(rounds: int, run: Callable[[], Plan]) -> tuple[Timing, Plan]:
    """Wall and CPU time per plan. On a busy machine the CPU time is the steadier figure."""
    wall_ms, cpu_ms = [], []
    result = run()
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run()
        cpu_ms.append((time.process_time() - cpu) * 1000)
        wall_ms.append((time.perf_counter() - wall) * 1000)
    return Timing(wall_ms, cpu_ms), result


def bench_scale(scale: Scale, rounds: int) -> list[tuple[str, Timing, Plan]]:
    rng = random.Random(f"planner-bench:{scale.name}")
    queues, busy = cluster(scale, rng)
    capacity = scale.slots // scale.hosts + 10
    hosts = [HostCapacity(f"host{i:03d}", capacity) for i in range(scale.hosts)]
    settled = stats_for(queues, busy, rng, changed_share=0.0)
    current = plan(SlotMap.empty(), queues, settled, hosts, target_load=TARGET_LOAD).slot_map
    changed = stats_for(queues, busy, rng, changed_share=0.1)
    lost = [
        HostCapacity(h.host, h.capacity_slots, alive=i % 5 != 0) for i, h in enumerate(hosts)
    ]
    cases: list[tuple[str, Callable[[], Plan]]] = [
        ("steady replan", lambda: plan(current, queues, changed, hosts, target_load=TARGET_LOAD)),
        ("cold start", lambda: plan(SlotMap.empty(), queues, settled, hosts,
                                    target_load=TARGET_LOAD)),
        ("20% hosts lost", lambda: plan(current, queues, changed, lost, target_load=TARGET_LOAD)),
    ]
    return [(label, *timed(rounds, run)) for label, run in cases]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, {args.rounds} timed rounds after one warm-up")
    print()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print()
    print("| scale | case | slots in map | moves | CPU ms median | CPU ms max "
          "| wall ms median | target ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    failed = False
    for scale in SCALES:
        for label, timing, result in bench_scale(scale, args.rounds):
            cpu = statistics.median(timing.cpu_ms)
            failed |= cpu >= scale.target_ms
            print(
                f"| {scale.name} ({scale.queues} queues, {scale.hosts} hosts) | {label} | "
                f"{result.slot_map.total_slots():,} | {len(result.moves):,} | {cpu:.1f} | "
                f"{max(timing.cpu_ms):.1f} | {statistics.median(timing.wall_ms):.1f} | "
                f"{scale.target_ms:.0f} |"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
