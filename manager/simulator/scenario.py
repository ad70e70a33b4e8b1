"""The simulator's scenario file (TOML): hosts, failures, and queues with arrivals and job times."""
from __future__ import annotations

import math
import random
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from config.errors import ConfigError
from config.models import QueueConfig
from config.problems import describe

# Step of the numeric mean of an arrival rate (static baseline sizing).
MEAN_RATE_STEP_S = 1.0


class _Strict(BaseModel):
    # strict as the cluster config (config/models.py): its [queues.*] tables are QueueConfig.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class JobTimes(_Strict):
    """Processing time of one job."""

    distribution: Literal["exponential", "lognormal", "constant"] = "exponential"
    mean_s: float = Field(gt=0)
    # lognormal: sigma of the underlying normal (1.0 gives a long tail).
    sigma: float = Field(default=1.0, gt=0)

    def draw_s(self, rng: random.Random) -> float:
        if self.distribution == "constant":
            return self.mean_s
        if self.distribution == "exponential":
            return rng.expovariate(1.0 / self.mean_s)
        mu = math.log(self.mean_s) - self.sigma**2 / 2
        return rng.lognormvariate(mu, self.sigma)


class Arrivals(_Strict):
    """Poisson arrivals whose rate follows a pattern.

    steady: rate_per_s. bursty: rate_per_s, and burst_rate_per_s for burst_length_s every
    burst_every_s from burst_offset_s. diurnal: rate_per_s x (1 + amplitude x sin), period_s
    long, shifted by phase_s. All: nothing before start_s or after stop_s.
    """

    pattern: Literal["steady", "bursty", "diurnal"] = "steady"
    rate_per_s: float = Field(ge=0)
    burst_rate_per_s: float = Field(default=0.0, ge=0)
    burst_every_s: float = Field(default=600.0, gt=0)
    burst_length_s: float = Field(default=60.0, ge=0)
    burst_offset_s: float = Field(default=0.0, ge=0)
    amplitude: float = Field(default=0.8, ge=0, le=1)
    period_s: float = Field(default=86400.0, gt=0)
    phase_s: float = 0.0
    start_s: float = Field(default=0.0, ge=0)
    stop_s: float | None = None

    def rate_at(self, t_s: float) -> float:
        if t_s < self.start_s or (self.stop_s is not None and t_s >= self.stop_s):
            return 0.0
        if self.pattern == "bursty":
            since = t_s - self.burst_offset_s
            in_burst = since >= 0 and since % self.burst_every_s < self.burst_length_s
            return self.burst_rate_per_s if in_burst else self.rate_per_s
        if self.pattern == "diurnal":
            angle = 2 * math.pi * (t_s - self.phase_s) / self.period_s
            return self.rate_per_s * (1 + self.amplitude * math.sin(angle))
        return self.rate_per_s

    def max_rate(self) -> float:
        if self.pattern == "bursty":
            return max(self.rate_per_s, self.burst_rate_per_s)
        if self.pattern == "diurnal":
            return self.rate_per_s * (1 + self.amplitude)
        return self.rate_per_s

    def mean_rate(self, duration_s: float) -> float:
        steps = max(int(duration_s / MEAN_RATE_STEP_S), 1)
        total = sum(self.rate_at((i + 0.5) * MEAN_RATE_STEP_S) for i in range(steps))
        return total / steps


class SimQueue(QueueConfig):
    """A queue's config plus how its jobs arrive and how long they take."""

    job: JobTimes
    arrivals: Arrivals


class HostGroup(_Strict):
    prefix: str = "host"
    count: int = Field(ge=1)
    capacity_slots: int = Field(ge=0)


class HostFailure(_Strict):
    """share of the hosts (picked with the scenario's seed) die at at_s."""

    at_s: float = Field(ge=0)
    share: float = Field(gt=0, le=1)
    recover_at_s: float | None = None


class Scenario(_Strict):
    name: str
    description: str = ""
    duration_s: float = Field(gt=0)
    seed: int = 1
    plan_interval_s: float = Field(default=5.0, gt=0)
    window_s: float = Field(default=60.0, gt=0)
    target_load: float = Field(default=0.8, gt=0)
    spawn_delay_s: float = Field(default=2.0, ge=0)
    retarget_delay_s: float = Field(default=0.2, ge=0)
    # Three missed 1 s heartbeats before the manager sees a host die.
    detect_delay_s: float = Field(default=3.0, ge=0)
    # As real slots report (slot/loop.py): a batch's busy time reaches the manager when the
    # batch ends, not while it runs. A cold queue's first long batch then shows no work
    # (issue 28); off by default, so the older scenarios' figures stay comparable.
    busy_at_batch_end: bool = False
    hosts: list[HostGroup] = Field(min_length=1)
    failures: list[HostFailure] = Field(default_factory=list)
    queues: dict[str, SimQueue] = Field(min_length=1)

    @model_validator(mode="after")
    def _host_names_unique(self) -> Scenario:
        prefixes = [g.prefix for g in self.hosts]
        if len(set(prefixes)) != len(prefixes):
            raise ValueError("host groups need distinct prefixes")
        return self

    def host_capacities(self) -> dict[str, int]:
        return {
            f"{group.prefix}{i:02d}": group.capacity_slots
            for group in self.hosts
            for i in range(group.count)
        }

    def failing_hosts(self, index: int) -> list[str]:
        failure = self.failures[index]
        names = sorted(self.host_capacities())
        count = max(1, round(failure.share * len(names)))
        return sorted(random.Random(f"{self.seed}:failure:{index}").sample(names, count))

    def high_priority_queue(self) -> str:
        return min(self.queues, key=lambda q: (-self.queues[q].priority, q))


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file; ConfigError names the file and the bad key."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read scenario: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe(exc)}") from exc
