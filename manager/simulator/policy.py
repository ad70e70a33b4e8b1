"""What a simulated cluster asks each plan interval (a Policy), and the planner as one."""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

from config.models import ManagerConfig
from manager.planning.burst import anything_to_take, bursting, plan_burst, settled_waiting
from manager.planning.job_times import JobTimeMemory
from manager.planning.planner import plan, window_seen
from manager.planning.stabilise import RecentPlans
from manager.simulator.scenario import Scenario
from manager.storage.model import HostCapacity, Move, QueueStats, SlotMap


class Policy(Protocol):
    name: str

    def decide(
        self,
        now_s: float,
        current: SlotMap,
        stats: Mapping[str, QueueStats],
        hosts: Sequence[HostCapacity],
    ) -> Sequence[Move]: ...


# The manager's default burst check, read from its config model so the two cannot drift:
# the simulator runs what a manager runs unless told otherwise (0: full plans alone).
MANAGER_BURST_CHECK_S: float = ManagerConfig.model_fields["burst_check_s"].default


class PlannerPolicy:
    name = "planner"

    def __init__(self, scenario: Scenario, *, burst_check_s: float = MANAGER_BURST_CHECK_S) -> None:
        self.scenario = scenario
        self.recent = RecentPlans()
        # As the manager's burst_check_s (0: no burst plans between full plans).
        self.burst_check_s = burst_check_s
        self.waiting_at_plan: dict[str, int] = {}
        self.last_planned: dict[str, int] = {}
        self.job_times = JobTimeMemory()  # as the manager's (manager/service.py)

    def decide(
        self,
        now_s: float,
        current: SlotMap,
        stats: Mapping[str, QueueStats],
        hosts: Sequence[HostCapacity],
    ) -> Sequence[Move]:
        stats = self.job_times.fill(stats)
        result = plan(
            current, self.scenario.queues, stats, hosts, target_load=self.scenario.target_load,
            full_window_s=self.scenario.window_s, keep=self.recent.keep(now_s),
        )
        if window_seen(stats, self.scenario.window_s):  # as manager/service.py does
            self.recent.record(now_s, result)
        self.waiting_at_plan = settled_waiting(
            self.waiting_at_plan, {q: s.waiting_jobs for q, s in stats.items()}, stats)
        self.last_planned = result.planned_counts()
        return result.moves

    def burst(
        self,
        current: SlotMap,
        waiting: Mapping[str, int],
        stats: Callable[[], Mapping[str, QueueStats]],
        hosts: Sequence[HostCapacity],
        idle: Collection[str] = (),
    ) -> Sequence[Move]:
        """Between full plans, as manager/service.py's plan_burst: the queues whose backlog
        appeared or jumped since the last plan grow at once (stats read only then)."""
        found = bursting(self.waiting_at_plan, waiting, self.scenario.queues, current.counts())
        if not found or not anything_to_take(current, self.scenario.queues, hosts, found,
                                             last_planned=self.last_planned, idle=idle):
            return ()
        result = plan_burst(current, self.scenario.queues, self.job_times.fill(stats()), hosts, found,
                            target_load=self.scenario.target_load, last_planned=self.last_planned,
                            idle=idle)
        if result.moves:
            self.waiting_at_plan = dict(waiting)  # as manager/service.py's plan_burst
            self.last_planned.update(result.planned_counts())
        return result.moves


