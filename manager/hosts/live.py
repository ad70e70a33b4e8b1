"""The slots running now, per queue, written for the dashboard every LIVE_EVERY_S (issue 28).

The history's samples are written once per plan (5 s): the Queues page and `/api/queues`
showed a burst queue at 1 slot about 5 s after its master ran 8. The manager holds every
master's last report (one per heartbeat); this module counts their running slots per queue
and the manager's map, and replaces the `live_slots` rows with them, with the age of the
oldest report behind the counts. A database outage loses these rows, never the loop.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from manager.storage.db import LiveSlots
from master.lifecycle import SlotState
from master.report import HostReport

log = logging.getLogger(__name__)

# Half a second: with the write's own time, the rows trail the manager's view by at most
# this, so the dashboard is within 1 s of what the manager heard from the masters.
LIVE_EVERY_S = 0.5


@dataclass(frozen=True, slots=True)
class LiveCount:
    queue: str
    running: int
    assigned: int


def live_counts(reports: Mapping[str, HostReport], assigned: Mapping[str, Mapping[str, str]],
                alive: list[str]) -> list[LiveCount]:
    """Per queue, the slots the live hosts report running and those the map gives it."""
    running: dict[str, int] = {}
    planned: dict[str, int] = {}
    for host in alive:
        report = reports.get(host)
        for slot in report.slots if report is not None else ():
            if slot.state == SlotState.RUNNING:
                running[slot.queue] = running.get(slot.queue, 0) + 1
        for queue in assigned.get(host, {}).values():
            planned[queue] = planned.get(queue, 0) + 1
    return [LiveCount(q, running.get(q, 0), planned.get(q, 0)) for q in sorted(set(running) | set(planned))]


class LiveWriter:
    """Replaces the live rows every LIVE_EVERY_S; logs an outage once, and its end."""

    def __init__(self, write: Callable[[list[LiveSlots]], None], *, wall_clock: Callable[[], float],
                 every_s: float = LIVE_EVERY_S) -> None:
        self.write = write
        self.wall_clock = wall_clock
        self.every_s = every_s
        self.due_at = float("-inf")
        self.failing = False

    def maybe_write(self, now: float, counts: Callable[[], list[LiveCount]],
                    reports_age_s: Callable[[], float]) -> bool:
        """Write when due (monotonic `now`); True when rows were written."""
        if now < self.due_at:
            return False
        self.due_at = now + self.every_s
        at_unix = self.wall_clock()
        age_s = max(0.0, reports_age_s())
        rows = [LiveSlots(queue=c.queue, running=c.running, assigned=c.assigned, at_unix=at_unix,
                          reports_age_s=age_s) for c in counts()]
        try:
            self.write(rows)
        except SQLAlchemyError as exc:
            if not self.failing:
                log.error("cannot store the live slot counts (%s); the dashboard shows the last "
                          "ones with their age, trying every %.1f s", exc, self.every_s)
            self.failing = True
            return False
        if self.failing:
            log.info("the live slot counts are stored again")
        self.failing = False
        return True
