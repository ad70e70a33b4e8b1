"""Rows of the manager's history, built from one plan and the figures beside it (pure: plan and
figures in, ORM objects out; manager/storage/store.py writes them)."""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from config.models import QueueConfig
from manager.storage.db import HostSample, QueueSample, SlotMapRow
from manager.storage.model import Plan, SlotMap
from manager.storage.stats import Totals
from master.lifecycle import Counter
from master.report import HostReport, QueueSettingsReport, cut
from master.start_failures import StartFailure
from queue_server.protocol.replies import QueueStats as ServerQueueStats

# A load of inf (work waiting, no slot lived) is stored as this: SQL and JSON readers cope.
MAX_STORED_LOAD = 1e6


def queue_samples(
    *,
    at_unix: float,
    plan: Plan,
    queues: Mapping[str, QueueConfig],
    paused: Iterable[str],
    window: Mapping[str, Totals],
    window_s: float,
    interval: Mapping[str, Totals],
    interval_s: float,
    server: Mapping[str, ServerQueueStats],
    failed: Mapping[str, int] | None = None,
    in_force: Mapping[str, QueueSettingsReport] | None = None,
) -> list[QueueSample]:
    """`failed`: failed attempts per queue since the last plan, from the queue server; they are
    the samples' errors (slots resolve failures per job now, so the errors slots report, a
    handler raising out of a whole batch, would read 0 while jobs fail). None: the slots'.
    `in_force`: the settings the masters give each queue's slots (manager/storage/stats.py
    settings_in_force); a queue no master handles gets no batch size, and `handled` False
    (None when `in_force` is not given). A queue the queue server holds jobs of (dead ones
    too) that no config names gets a row as well, `configured` False: nothing serves it."""
    handled_known = in_force is not None
    in_force = in_force or {}
    paused = set(paused)
    rows: list[QueueSample] = []
    for name, figures in sorted(plan.queues.items()):
        config = queues[name]
        in_window = window.get(name, Totals())
        in_interval = interval.get(name, Totals())
        on_server = server.get(name)
        rows.append(QueueSample(
            at_unix=at_unix,
            queue=name,
            priority=config.priority,
            min_slots=config.min_slots,
            max_slots=config.max_slots,
            slots_current=figures.slots,
            slots_avg=in_window.slot_s / window_s if window_s > 0 else 0.0,
            slots_desired=figures.desired_slots,
            load=storable(figures.load),
            waiting=on_server.ready if on_server else 0,
            running=on_server.running if on_server else 0,
            delayed=on_server.delayed if on_server else 0,
            jobs_done=in_interval.jobs_done,
            jobs_per_s=in_interval.jobs_done / interval_s if interval_s > 0 else 0.0,
            mean_job_s=in_window.busy_s / in_window.jobs_done if in_window.jobs_done else 0.0,
            errors=in_interval.errors if failed is None else failed.get(name, 0),
            paused=name in paused,
            batch_size=in_force[name].batch_size if name in in_force else None,
            batch_size_source=in_force[name].batch_size_source if name in in_force else None,
            failed=on_server.failed if on_server else 0,
            dead=on_server.dead if on_server else 0,
            configured=True,
            handled=name in in_force if handled_known else None,
        ))
    for name, on_server in sorted(server.items()):
        if name in plan.queues or not holds_jobs(on_server):
            continue
        rows.append(QueueSample(
            at_unix=at_unix, queue=name, priority=0, min_slots=0, max_slots=0, slots_current=0,
            slots_avg=0.0, slots_desired=0, load=0.0, waiting=on_server.ready,
            running=on_server.running, delayed=on_server.delayed, jobs_done=0, jobs_per_s=0.0,
            mean_job_s=0.0, errors=failed.get(name, 0) if failed is not None else 0, paused=False,
            failed=on_server.failed, dead=on_server.dead, configured=False,
            handled=name in in_force if handled_known else None,
        ))
    return rows


def holds_jobs(stats: ServerQueueStats) -> bool:
    """Waiting, running or dead jobs on the queue server (a queue with none is not shown)."""
    return stats.ready + stats.delayed + stats.running + stats.dead > 0


# db.HostSample.code_reload_failure's column.
CODE_FAILURE_CHARS = 500


def host_samples(*, at_unix: float, reports: Sequence[tuple[HostReport, bool]]) -> list[HostSample]:
    """One row per host: its last report and whether it is alive."""
    return [
        HostSample(
            at_unix=at_unix,
            host=report.host,
            alive=alive,
            capacity=report.capacity if alive else 0,
            slots=len(report.slots) if alive else 0,
            mem_total_bytes=report.mem_total_bytes,
            mem_available_bytes=report.mem_available_bytes,
            master_pss_bytes=report.master_pss_bytes,
            slots_pss_bytes=report.slots_pss_bytes,
            avg_slot_bytes=report.avg_slot_bytes,
            load_avg_1m=report.load_avg_1m,
            recycled_for_memory=report.counters.get(Counter.RECYCLED_FOR_MEMORY, 0),
            killed_hung=report.counters.get(Counter.KILLED_HUNG, 0),
            recycled_for_jobs=report.recycled_for_jobs,
            recycled_for_age=report.recycled_for_age,
            load_cap=report.load_cap() if alive else None,
            code_version=report.code_version or None,
            code_reload_failure=cut(report.code_reload_failure, CODE_FAILURE_CHARS)
            if alive and report.code_reload_failure else None,
            start_failures=stored_start_failures(report.start_failures, at_unix) if alive else None,
        )
        for report, alive in reports
    ]


# db.HostSample.start_failures's column, and each error's share of it: a sample is written
# per host and plan, so it keeps the short form (the traceback is in the failure's event).
START_FAILURES_CHARS = 2000
STORED_ERROR_CHARS = 160


def stored_start_failures(failures: Sequence[StartFailure], at_unix: float) -> str | None:
    """The report's start failures as the sample stores them: JSON objects without their
    traceback, the back-off as a time (`retry_at_unix`), as many as fit the column."""
    kept: list[dict[str, Any]] = []
    for failure in failures:
        row = {"kind": failure.kind, "queue": failure.queue, "source": cut(failure.source, STORED_ERROR_CHARS),
               "error": cut(failure.error, STORED_ERROR_CHARS), "count": failure.count,
               "first_at_unix": round(failure.first_at_unix, 3), "last_at_unix": round(failure.last_at_unix, 3),
               "retry_at_unix": None if failure.retry_in_s is None else round(at_unix + failure.retry_in_s, 3)}
        if len(json.dumps([*kept, row])) > START_FAILURES_CHARS:
            break
        kept.append(row)
    return json.dumps(kept) if kept else None


def read_start_failures(stored: str | None) -> list[dict[str, Any]]:
    """The stored JSON back (an empty list for none, or for a column that does not parse)."""
    if not stored:
        return []
    try:
        rows = json.loads(stored)
    except ValueError:
        return []
    return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []


def slot_map_rows(*, at_unix: float, slot_map: SlotMap) -> list[SlotMapRow]:
    rows: list[SlotMapRow] = []
    for host in sorted(slot_map.hosts):
        counts: dict[str, int] = {}
        for queue in slot_map.hosts[host].values():
            counts[queue] = counts.get(queue, 0) + 1
        rows += [
            SlotMapRow(at_unix=at_unix, host=host, queue=queue, slots=n)
            for queue, n in sorted(counts.items())
        ]
    return rows


def storable(load: float) -> float:
    if math.isnan(load):
        return 0.0
    return min(load, MAX_STORED_LOAD)
