"""The manager's history in SQL as the loop writes it: events noted during a turn, rows per plan, retention.

A database outage loses rows, never the loop: every write here logs what was lost and returns.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from sqlalchemy.exc import SQLAlchemyError

from config.models import QueueConfig
from manager.storage.model import Plan
from manager.storage.samples import host_samples, queue_samples, slot_map_rows
from manager.storage.stats import WorkWindow
from manager.storage.store import NewEvent, Override, Store, event_row
from master.report import HostReport, QueueSettingsReport
from queue_server.protocol.replies import QueueStats as ServerQueueStats

log = logging.getLogger(__name__)


class History:
    def __init__(self, store: Store, *, wall_clock: Callable[[], float]) -> None:
        self.store = store
        self.wall_clock = wall_clock
        # Events with the unix time they happened, written at the end of the loop turn.
        self.events: list[tuple[float, NewEvent]] = []

    def note(self, event: NewEvent) -> None:
        self.events.append((self.wall_clock(), event))

    def flush(self, rows: Sequence[object] = ()) -> None:
        """Write rows and pending events in one transaction; a database outage loses
        this interval's history, never the loop."""
        events, self.events = self.events, []
        try:
            self.store.write([*rows, *(event_row(at, e) for at, e in events)])
        except SQLAlchemyError as exc:
            log.error("cannot store history (%s); this interval is lost, planning goes on", exc)

    def record_plan(
        self, *, now: float, at_unix: float, last_plan_at: float | None, plan: Plan,
        queues: Mapping[str, QueueConfig], overrides: Mapping[str, Override],
        in_force: Mapping[str, QueueSettingsReport], work: WorkWindow,
        server: Mapping[str, ServerQueueStats], failed: Mapping[str, int] | None,
        hosts: Sequence[tuple[HostReport, bool]],
    ) -> None:
        """A plan's rows (queue samples, host samples, the slot map) with the pending events."""
        interval_s = now - last_plan_at if last_plan_at is not None else work.effective_window_s(now)
        rows: list[object] = []
        rows += queue_samples(
            at_unix=at_unix, plan=plan, queues=queues,
            paused=[name for name, o in overrides.items() if o.paused],
            window=work.totals(now), window_s=work.effective_window_s(now),
            interval=work.totals(now, since=last_plan_at if last_plan_at is not None else now - interval_s),
            interval_s=interval_s, server=server, failed=failed,
            in_force=in_force,
        )
        rows += host_samples(at_unix=at_unix, reports=hosts)
        rows += slot_map_rows(at_unix=at_unix, slot_map=plan.slot_map)
        self.flush(rows)

    def recent_hosts(self) -> set[str]:
        try:
            return self.store.recent_hosts()
        except SQLAlchemyError as exc:
            log.warning("cannot read the last known hosts (%s); planning after the grace period", exc)
            return set()

    def last_job_times(self) -> dict[str, float]:
        try:
            return self.store.last_job_times()
        except SQLAlchemyError as exc:
            log.warning("cannot read the queues' last job times (%s); cold queues start on the "
                        "assumed one", exc)
            return {}

    def prune(self, *, retention_days: float, retry_in_s: float) -> None:
        try:
            deleted = self.store.prune(now_unix=self.wall_clock(), retention_days=retention_days)
        except SQLAlchemyError as exc:
            log.error("cannot prune old history (%s); trying again in %.0f s", exc, retry_in_s)
            return
        if deleted:
            log.info("pruned %d history rows older than %.1f days", deleted, retention_days)
