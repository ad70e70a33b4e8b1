"""Prometheus exposition: per-queue and per-host gauges from the newest samples, counters summed from history."""
from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from admin_ui.format import LOAD_INFINITE
from manager.storage.store import EventKind, Store
from manager.storage.store_reads import StoreReads, reading

# (metric suffix, QueueReading attribute, help)
QUEUE_GAUGES = (
    ("priority", "priority", "Configured priority of the queue."),
    ("min_slots", "min_slots", "Minimum slots the manager keeps for the queue."),
    ("max_slots", "max_slots", "Maximum slots the manager gives the queue."),
    ("slots", "slots_current", "Slots working on the queue now."),
    ("slots_avg", "slots_avg", "Average slots over the manager's stats window."),
    ("slots_desired", "slots_desired", "Slots the manager wants for the queue."),
    ("load_ratio", "load", "Load: (processing + backlog time) / slot time; 1 = 100%."),
    ("jobs_waiting", "waiting", "Ready jobs waiting in the queue."),
    ("jobs_locked", "running", "Jobs handed out and locked (being processed)."),
    ("jobs_delayed", "delayed", "Jobs delayed until a later activation time."),
    ("jobs_per_second", "jobs_per_s", "Jobs done per second over the last interval."),
    ("job_seconds_mean", "mean_job_s", "Mean processing time of a job."),
    ("paused", "paused", "1 when the queue is paused."),
    ("sample_timestamp_seconds", "at_unix", "Unix time of the queue's newest sample."),
)
HOST_GAUGES = (
    ("up", "alive", "1 while the host's master reports to the manager."),
    ("capacity_slots", "capacity", "Slots the host can run (memory, load, configured maximum)."),
    ("slots", "slots", "Slots running on the host."),
    ("memory_total_bytes", "mem_total_bytes", "Total memory of the host."),
    ("memory_available_bytes", "mem_available_bytes", "MemAvailable of the host."),
    ("master_pss_bytes", "master_pss_bytes", "PSS of the master process."),
    ("slots_pss_bytes", "slots_pss_bytes", "PSS of all slots together."),
    ("avg_slot_bytes", "avg_slot_bytes", "Average slot size: (master + slots PSS) / slots."),
    ("load_average_1m", "load_avg_1m", "One-minute load average."),
)
HOST_COUNTERS = (
    ("slots_recycled_for_memory", "recycled_for_memory",
     "Slots that exited over their Private_Dirty limit (since the master started)."),
    ("slots_recycled_for_jobs", "recycled_for_jobs",
     "Slots that left after max_jobs_per_slot jobs (since the master started)."),
    ("slots_recycled_for_age", "recycled_for_age",
     "Slots that left past max_slot_age_s (since the master started)."),
    ("slots_killed_hung", "killed_hung", "Slots killed for missing beacons (since the master started)."),
)


class _Totals:
    """Counters over the manager's samples: at the first scrape, everything stored since the
    active manager started (its `manager_active` event; all of the history when that event is
    pruned); then the rows stored since, added at each scrape.

    Starting at 0 with the first scrape (as before) made a dashboard opened after the work
    read 0 (2,000 jobs done, the old `slotmap_queue_jobs_done_total` 0). Starting with the manager's
    run keeps the first read to one run's rows; retention never makes a counter go down, since
    rows are only ever added to what was read. A restarted dashboard starts again from the
    manager's run, which Prometheus reads as a counter reset if it is lower.
    """

    def __init__(self, *, forget_after_s: float) -> None:
        self.lock = threading.Lock()
        self.forget_after_s = forget_after_s
        self.started = False
        self.sample_id = 0
        self.event_id = 0
        self.errors: dict[str, float] = {}
        self.events: dict[str, float] = {}
        # (queue, cause) -> slot crashes, from slot_crashed events (their detail's causes)
        self.crashes: dict[tuple[str, str], float] = {}
        self.crash_event_id = 0

    def _start(self, reads: StoreReads) -> None:
        """Series for the current queues and known kinds, holding the manager's run so far."""
        for sample in reads.latest_queue_samples(forget_after_s=self.forget_after_s):
            self.errors[sample.queue] = 0.0
        for kind in reads.event_kinds():
            self.events[kind] = 0.0
        since = reads.last_event_at(EventKind.MANAGER_ACTIVE)
        newest_sample, newest_event = reads.newest_ids()
        self._add_samples(reads, since_unix=since)
        self._add_events(reads, since_unix=since)
        self._add_crashes(reads, since_unix=since)
        # Rows stored before the manager's run stay out later too.
        self.sample_id = max(self.sample_id, newest_sample)
        self.event_id = max(self.event_id, newest_event)
        self.crash_event_id = max(self.crash_event_id, newest_event)
        self.started = True

    def _add_samples(self, reads: StoreReads, *, since_unix: float | None = None) -> None:
        for counts in reads.queue_counts(after_id=self.sample_id, since_unix=since_unix):
            self.errors[counts.queue] = self.errors.get(counts.queue, 0) + counts.errors
            self.sample_id = max(self.sample_id, counts.last_id)

    def _add_events(self, reads: StoreReads, *, since_unix: float | None = None) -> None:
        for counted in reads.kind_counts(after_id=self.event_id, since_unix=since_unix):
            self.events[counted.kind] = self.events.get(counted.kind, 0) + float(counted.count)
            self.event_id = max(self.event_id, counted.last_id)

    def _add_crashes(self, reads: StoreReads, *, since_unix: float | None = None) -> None:
        for event_id, queue, detail in reads.crash_details(after_id=self.crash_event_id, since_unix=since_unix):
            causes = detail.get("causes") if detail else None
            for cause, count in (causes.items() if isinstance(causes, dict) else ()):
                if isinstance(count, int | float) and math.isfinite(count) and count >= 0:
                    key = (queue or "", str(cause))
                    self.crashes[key] = self.crashes.get(key, 0) + float(count)
            self.crash_event_id = max(self.crash_event_id, event_id)

    def advance(self, reads: StoreReads) -> None:
        with self.lock:
            if not self.started:
                self._start(reads)
                return
            self._add_samples(reads)
            self._add_events(reads)
            self._add_crashes(reads)


class DashboardCollector(Collector):
    """Reads the database at every scrape (one short read transaction)."""

    def __init__(self, store: Store, *, forget_after_s: float, clock: Callable[[], float]) -> None:
        self.store = store
        self.forget_after_s = forget_after_s
        self.clock = clock
        self.totals = _Totals(forget_after_s=forget_after_s)

    def collect(self) -> Iterator[Metric]:
        with reading(self.store) as reads:
            if reads.missing_tables():
                return
            self.totals.advance(reads)
            yield from self._queue_metrics(reads)
            yield from self._host_metrics(reads)
            yield from self._counters()

    def _queue_metrics(self, reads: StoreReads) -> Iterator[Metric]:
        samples = reads.latest_queue_samples(forget_after_s=self.forget_after_s)
        for suffix, attribute, text in QUEUE_GAUGES:
            family = GaugeMetricFamily(f"slotmap_queue_{suffix}", text, labels=["queue"])
            for sample in samples:
                value = float(getattr(sample, attribute))
                if attribute == "load" and value >= LOAD_INFINITE:
                    value = math.inf  # work waiting and no slot time yet
                family.add_metric([sample.queue], value)
            yield family
        newest = max((sample.at_unix for sample in samples), default=None)
        age = GaugeMetricFamily("slotmap_data_age_seconds",
                                "Seconds since the manager's newest queue sample.")
        if newest is not None:
            age.add_metric([], max(0.0, self.clock() - newest))
        yield age

    def _host_metrics(self, reads: StoreReads) -> Iterator[Metric]:
        hosts = reads.latest_host_samples(forget_after_s=self.forget_after_s)
        for suffix, attribute, text in HOST_GAUGES:
            family = GaugeMetricFamily(f"slotmap_host_{suffix}", text, labels=["host"])
            for host in hosts:
                value = float(getattr(host, attribute))
                if attribute == "mem_total_bytes" and not value:
                    continue  # not reported by this master
                family.add_metric([host.host], value)
            yield family
        for suffix, attribute, text in HOST_COUNTERS:
            counter = CounterMetricFamily(f"slotmap_host_{suffix}", text, labels=["host"])
            for host in hosts:
                counter.add_metric([host.host], float(getattr(host, attribute)))
            yield counter
        cells = GaugeMetricFamily("slotmap_slot_map_slots", "Slots the current slot map gives a queue on a host.",
                                  labels=["host", "queue"])
        for row in reads.slot_map():
            cells.add_metric([row.host, row.queue], float(row.slots))
        yield cells

    def _counters(self) -> Iterator[Metric]:
        totals = self.totals
        errors = CounterMetricFamily(
            "slotmap_queue_errors", "Handler errors slots reported, from the manager's samples since it became "
            "active (slots that exit between two reports are missed: slotmap_jobs_failed counts every FAIL).",
            labels=["queue"])
        events = CounterMetricFamily(
            "slotmap_events", "Manager and admin events recorded since the manager became active, by kind.",
            labels=["kind"])
        crashes = CounterMetricFamily(
            "slotmap_slot_crashes", "Slots that died unasked or were killed by their master, since the manager "
            "became active, by queue and cause (exit_<code>, SIG<NAME>, hung, over_memory, stop_deadline, "
            "setup_failed, no_handler).", labels=["queue", "cause"])
        with totals.lock:
            for queue, value in sorted(totals.errors.items()):
                errors.add_metric([queue], value)
            for kind, value in sorted(totals.events.items()):
                events.add_metric([kind], value)
            for (queue, cause), value in sorted(totals.crashes.items()):
                crashes.add_metric([queue, cause], value)
        yield from (errors, events, crashes)


def make_registry(store: Store, *, forget_after_s: float, clock: Callable[[], float]) -> CollectorRegistry:
    """A registry of its own (not the process-global one), so several apps can live in one test run."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DashboardCollector(store, forget_after_s=forget_after_s, clock=clock))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
