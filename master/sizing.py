"""How many slots this host runs now: the master's PSS, its slots' (from their beacons) and MemAvailable, measured once a second.

The arithmetic is master/capacity.py; this module only decides when to measure and what
counts: slots that have not measured themselves yet would drag the average slot down.
"""
from __future__ import annotations

import logging
from collections.abc import Collection

from config.models import MasterConfig
from master import host
from master.capacity import Capacity, capacity, smoothed_busy
from master.lifecycle import Slot
from slot.beacon import SlotPhase

log = logging.getLogger(__name__)

CAPACITY_REFRESH_S = 1.0
# Phases in which a slot runs a batch: what it adds to the load average.
BUSY_PHASES = frozenset({SlotPhase.BUSY, SlotPhase.DRAINING})


class Sizing:
    def __init__(self, settings: MasterConfig) -> None:
        self.settings = settings
        self.capacity = Capacity(0, 0, 0, settings.max_slots, 1)
        self.figures = host.HostFigures(0, (), 0, 0.0, 1)
        self.busy_slots = 0.0
        self._measured_at = float("-inf")

    def refresh(self, now: float, slots: Collection[Slot]) -> None:
        if now - self._measured_at < CAPACITY_REFRESH_S:
            return
        elapsed_s = now - self._measured_at if self._measured_at > float("-inf") else 0.0
        self._measured_at = now
        busy_now = sum(1 for s in slots if s.beacon and s.beacon.phase in BUSY_PHASES)
        self.busy_slots = smoothed_busy(previous=self.busy_slots, busy_now=busy_now, elapsed_s=elapsed_s)
        figures = self.figures = host.measure(
            [s.beacon.pss_bytes for s in slots if s.beacon and s.beacon.pss_bytes]
        )
        before = self.capacity
        self.capacity = capacity(
            master_pss_bytes=figures.master_pss_bytes,
            slots_pss_bytes=figures.slots_pss_bytes,
            mem_available_bytes=figures.mem_available_bytes,
            reserve_slots=self.settings.reserve_slots,
            max_slots=self.settings.max_slots,
            load_avg_1m=figures.load_avg_1m,
            cpus=figures.cpus,
            max_load_per_cpu=self.settings.max_load_per_cpu,
            busy_slots=self.busy_slots,
            min_slots_under_load=self.settings.min_slots_under_load,
        )
        self._tell_load_cap(before, self.capacity)

    def _tell_load_cap(self, before: Capacity, after: Capacity) -> None:
        """Once per change, not every second: a cap that stays is said once."""
        if after.capped_by_load and (not before.capped_by_load or before.slots != after.slots):
            log.warning(
                "capped by load: %d of %d slots (load %.2f on %d CPUs, limit %g); the cap "
                "follows the load, never below min_slots_under_load = %d",
                after.slots, min(after.by_memory, after.max_slots), self.figures.load_avg_1m,
                self.figures.cpus, after.load_limit, self.settings.min_slots_under_load,
            )
        elif before.capped_by_load and not after.capped_by_load:
            log.info("no longer capped by load (load %.2f on %d CPUs, limit %g): %d slots",
                     self.figures.load_avg_1m, self.figures.cpus, after.load_limit, after.slots)
