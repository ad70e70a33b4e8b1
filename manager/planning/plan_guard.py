"""The planner's inputs checked at its boundary (pure): one bad figure costs its own queue or host, never the plan.

The doors (config/bounded.py) already refuse non-finite and out-of-range numbers from
peers; this is the second line, for whatever got past them (a sum that overflowed, a
bug in a reader, a future input). A queue whose window figures are not finite and
non-negative is planned as if nothing ran in its window; a host's capacity is clamped to
0 .. MAX_SLOTS. Before this, one NaN `busy_s` failed every plan with "cannot convert
float NaN to integer" for as long as the figure stayed in the stats window.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace

from config.bounded import MAX_SLOTS
from manager.planning.planner import NO_STATS
from manager.storage.model import HostCapacity, QueueStats


@dataclass(frozen=True, slots=True)
class Checked:
    stats: dict[str, QueueStats]
    hosts: list[HostCapacity]
    # What was replaced ("queue q" or "host h") -> why (empty when every input was sound).
    rejected: dict[str, str]


def sound_stats(stats: QueueStats) -> bool:
    values = [getattr(stats, f.name) for f in fields(stats)]
    return all(isinstance(v, int | float) and math.isfinite(v) and v >= 0 for v in values)


def check_inputs(stats: Mapping[str, QueueStats], hosts: Sequence[HostCapacity]) -> Checked:
    rejected: dict[str, str] = {}
    checked_stats: dict[str, QueueStats] = {}
    for queue, figures in stats.items():
        if sound_stats(figures):
            checked_stats[queue] = figures
        else:
            rejected[f"queue {queue}"] = (f"window figures {figures} are not finite and "
                                          "non-negative; planned as if nothing ran")
            checked_stats[queue] = replace(NO_STATS, window_s=_finite_window(figures.window_s))
    checked_hosts: list[HostCapacity] = []
    for host in hosts:
        capacity = host.capacity_slots
        if isinstance(capacity, int) and 0 <= capacity <= MAX_SLOTS:
            checked_hosts.append(host)
            continue
        clamped = min(max(capacity, 0), MAX_SLOTS) if isinstance(capacity, int) else 0
        rejected[f"host {host.host}"] = f"capacity {capacity!r} clamped to {clamped}"
        checked_hosts.append(replace(host, capacity_slots=clamped))
    return Checked(checked_stats, checked_hosts, rejected)


def _finite_window(window_s: float) -> float:
    return window_s if math.isfinite(window_s) and window_s > 0 else NO_STATS.window_s
