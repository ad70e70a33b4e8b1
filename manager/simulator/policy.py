"""What a simulated cluster asks each plan interval (a Policy), and the planner as one."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from manager.model import HostCapacity, Move, QueueStats, SlotMap
from manager.planner import plan, window_seen
from manager.simulator.scenario import Scenario
from manager.stabilise import RecentPlans


class Policy(Protocol):
    name: str

    def decide(
        self,
        now_s: float,
        current: SlotMap,
        stats: Mapping[str, QueueStats],
        hosts: Sequence[HostCapacity],
    ) -> Sequence[Move]: ...


class PlannerPolicy:
    name = "planner"

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.recent = RecentPlans()

    def decide(
        self,
        now_s: float,
        current: SlotMap,
        stats: Mapping[str, QueueStats],
        hosts: Sequence[HostCapacity],
    ) -> Sequence[Move]:
        result = plan(
            current, self.scenario.queues, stats, hosts, target_load=self.scenario.target_load,
            full_window_s=self.scenario.window_s, keep=self.recent.keep(now_s),
        )
        if window_seen(stats, self.scenario.window_s):  # as manager/service.py does
            self.recent.record(now_s, result)
        return result.moves


