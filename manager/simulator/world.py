"""What the simulator moves in virtual time: the seeded job stream, slots, and each queue's integrated counters."""
from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum, auto

from manager.simulator.scenario import Scenario

# (arrival time, processing time) of one job
Job = tuple[float, float]


class Phase(StrEnum):
    STARTING = auto()  # forked or retargeted, not taking jobs yet
    IDLE = auto()
    BUSY = auto()


@dataclass(slots=True, eq=False)
class SimSlot:
    slot_id: str
    host: str
    queue: str
    phase: Phase = Phase.STARTING
    next_queue: str | None = None  # retarget once the batch is done
    stopping: bool = False  # exit once the batch is done
    alive: bool = True
    epoch: int = 0  # bumps when a scheduled event of this slot no longer applies
    ready_at_s: float = 0.0
    batch: list[Job] = field(default_factory=list)
    batch_start_s: float = 0.0


def generate_jobs(scenario: Scenario) -> dict[str, list[Job]]:
    """Each queue's jobs over the run: Poisson arrivals by thinning, seeded per queue."""
    jobs: dict[str, list[Job]] = {}
    for name in sorted(scenario.queues):
        queue = scenario.queues[name]
        arrivals_rng = random.Random(f"{scenario.seed}:{name}:arrivals")
        times_rng = random.Random(f"{scenario.seed}:{name}:job-times")
        peak = queue.arrivals.max_rate()
        stream: list[Job] = []
        t_s = 0.0
        while peak > 0:
            t_s += arrivals_rng.expovariate(peak)
            if t_s >= scenario.duration_s:
                break
            if arrivals_rng.random() * peak < queue.arrivals.rate_at(t_s):
                stream.append((t_s, queue.job.draw_s(times_rng)))
        jobs[name] = stream
    return jobs


class QueueBooks:
    """Counters of one queue, integrated over virtual time."""

    __slots__ = (
        "alive",
        "backlog_max",
        "backlog_s",
        "busy",
        "busy_s",
        "done",
        "idle",
        "last_s",
        "lifetime_s",
        "waiting",
        "waits_s",
    )

    def __init__(self) -> None:
        self.busy = 0
        self.alive = 0
        self.busy_s = 0.0
        self.lifetime_s = 0.0
        self.backlog_s = 0.0
        self.backlog_max = 0
        self.done = 0
        self.last_s = 0.0
        self.waiting: deque[Job] = deque()
        self.idle: deque[SimSlot] = deque()
        self.waits_s: list[float] = []

    def touch(self, now_s: float) -> None:
        elapsed = now_s - self.last_s
        if elapsed > 0:
            self.busy_s += self.busy * elapsed
            self.lifetime_s += self.alive * elapsed
            self.backlog_s += len(self.waiting) * elapsed
            self.last_s = now_s


