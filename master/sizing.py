"""How many slots this host runs now: the master's PSS, its slots' (from their beacons) and MemAvailable, measured once a second.

The arithmetic is master/capacity.py; this module only decides when to measure and what
counts: slots that have not measured themselves yet would drag the average slot down.
"""
from __future__ import annotations

from collections.abc import Iterable

from config.models import MasterConfig
from master import host
from master.capacity import Capacity, capacity
from master.lifecycle import Slot

CAPACITY_REFRESH_S = 1.0


class Sizing:
    def __init__(self, settings: MasterConfig) -> None:
        self.settings = settings
        self.capacity = Capacity(0, 0, 0, settings.max_slots, 1)
        self.figures = host.HostFigures(0, (), 0, 0.0, 1)
        self._measured_at = float("-inf")

    def refresh(self, now: float, slots: Iterable[Slot]) -> None:
        if now - self._measured_at < CAPACITY_REFRESH_S:
            return
        self._measured_at = now
        figures = self.figures = host.measure(
            [s.beacon.pss_bytes for s in slots if s.beacon and s.beacon.pss_bytes]
        )
        self.capacity = capacity(
            master_pss_bytes=figures.master_pss_bytes,
            slots_pss_bytes=figures.slots_pss_bytes,
            mem_available_bytes=figures.mem_available_bytes,
            reserve_slots=self.settings.reserve_slots,
            max_slots=self.settings.max_slots,
            load_avg_1m=figures.load_avg_1m,
            cpus=figures.cpus,
            max_load_per_cpu=self.settings.max_load_per_cpu,
        )
