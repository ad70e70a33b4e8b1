"""/metrics from the queue server's STATS, read at each scrape: true counters since the server started.

The manager's samples (metrics.py) hold what slots reported per planning interval; these
come straight from the queue server, so they count every job whatever the dashboard or the
manager did meanwhile (a restarted queue server starts them at 0 again, as Prometheus expects).
"""
from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Collection, Iterator, Sequence
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from admin_ui import latency_metrics
from admin_ui.errors import QueueServerUnavailable
from admin_ui.queue_link import ask
from admin_ui.queue_roles import QueueRolesCollector
from admin_ui.settings import AdminSettings
from queue_server.client import QueueClient
from queue_server.protocol.client_errors import QueueServerError
from queue_server.protocol.replies import QueueStats

log = logging.getLogger(__name__)

# (metric family, STATS field, help); counters get `_total` in the exposition.
COUNTERS = (
    ("slotmap_jobs_put", "put", "Jobs put since the queue server started."),
    ("slotmap_jobs_done", "done",
     "Jobs done (DONE) since the queue server started: the one done "
     "counter (the manager's sampled slotmap_queue_jobs_done is gone: it missed the jobs of slots "
     "that exited between two reports and of clients other than slots)."),
    ("slotmap_jobs_failed", "failed_total",
     "Failed attempts (FAIL, a slot's crash, an expired managed lock) since the queue server started."),
    ("slotmap_jobs_died", "dead_total", "Jobs that became dead since the queue server started."),
    ("slotmap_jobs_dead_dropped", "dead_dropped",
     "Dead jobs dropped over dead_max or dead_max_age_s, or replaced by a new PUT of their key, "
     "since the queue server started."),
    ("slotmap_jobs_ttl_expired", "ttl_expired",
     "Jobs deleted because their TTL (PUT ... TTL) ran out before a hand-out, since the queue "
     "server started."),
    ("slotmap_jobs_retried", "retried", "Jobs retried by hand (RETRY) since the queue server started."),
    ("slotmap_jobs_deleted", "deleted", "Jobs deleted by hand (DELETE, or a CANCEL of a job not running) since the queue server started."),
    ("slotmap_jobs_later", "later", "Jobs postponed (LATER) since the queue server started."),
    ("slotmap_jobs_expired", "expired", "Locks that expired since the queue server started."),
)
GAUGES = (
    ("slotmap_jobs_dead", "dead", "Dead jobs kept now (out of attempts; retry or delete them)."),
    ("slotmap_jobs_failed_waiting", "failed", "Failed jobs waiting for their retry now."),
    ("slotmap_queue_oldest_waiting_age_seconds", "oldest_ready_age_s",
     "Age of the oldest ready job (0 when none is ready): how long it has waited to be handed out."),
)
# A dead queue server is logged once a minute, not at every scrape.
WARN_EVERY_S = 60.0
# Series per scrape: the configured queues, the queues holding the most jobs, then one series
# labelled "*" for all the others summed (STATS TOP, docs/PROTOCOL.md Part B). 50,000 queues
# made /metrics 30 MB in 10.6 s; a queue server without STATS TOP (400) is read in full.
TOP_QUEUES = 200
OTHERS = "*"
# Names per STATS q1|q2|... and STATS LATENCY request (the server takes up to 1,000).
NAMES_PER_REQUEST = 400


class QueueServerCollector(Collector):
    def __init__(self, settings: AdminSettings) -> None:
        self.settings = settings
        self._warned_at = float("-inf")

    def collect(self) -> Iterator[Metric]:
        if not self.settings.queue_servers:
            return
        up = GaugeMetricFamily("slotmap_queue_server_up", "1 when the dashboard could read the queue server's STATS.")
        try:
            stats, latency = ask(self.settings, partial(_top_queues, configured=sorted(self.settings.queues)))
        except QueueServerUnavailable as exc:
            self._warn(exc)
            up.add_metric([], 0.0)
            yield up
            return
        up.add_metric([], 1.0)
        yield up
        yield from families(stats)
        yield from latency_metrics.families(latency, configured=self.settings.queues)

    def _warn(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY_S:
            self._warned_at = now
            log.warning("no queue server counters on /metrics (%s); slotmap_queue_server_up is 0", exc)


def _top_queues(client: QueueClient, *, configured: Sequence[str]) -> tuple[dict[str, QueueStats], dict[str, Any]]:
    """STATS TOP, the configured queues not in it, then STATS LATENCY of them all (nothing
    from a server without it: 400). A configured queue always has its own series: ranked by
    the jobs it holds, a busy queue that keeps up (holding none) would move in and out of
    "*" between scrapes, its series vanishing and its counts jumping into "*"'s counters."""
    try:
        stats = client.stats_top(TOP_QUEUES)
    except QueueServerError as exc:
        if exc.code != 400:
            raise
        stats = client.stats()
    missing = [name for name in configured if name not in stats]
    for start in range(0, len(missing), NAMES_PER_REQUEST):
        found = client.stats_of(missing[start:start + NAMES_PER_REQUEST])
        if OTHERS in stats:
            stats[OTHERS] = _without(stats[OTHERS], found.values())
        stats.update(found)
    names = sorted(name for name in stats if name != OTHERS)
    latency: dict[str, Any] = {}
    try:
        for start in range(0, len(names), NAMES_PER_REQUEST):
            part = client.stats_latency(names[start:start + NAMES_PER_REQUEST])
            latency.setdefault("bounds_s", part.get("bounds_s", []))
            latency.setdefault("queues", {}).update(part.get("queues", {}))
    except QueueServerError as exc:
        if exc.code != 400:
            raise
    return stats, latency


# The counts "*" sums; its oldest_ready_age_s (a max) stays: it may be a configured queue's.
_SUMMED = tuple(field.name for field in dataclasses.fields(QueueStats) if field.type == "int")


def _without(others: QueueStats, queues: Collection[QueueStats]) -> QueueStats:
    """"*" less the queues now shown on their own (an unknown queue reads all zeros)."""
    less = {name: getattr(others, name) - sum(getattr(entry, name) for entry in queues)
            for name in _SUMMED}
    return dataclasses.replace(others, **{name: max(0, value) for name, value in less.items()})


def families(stats: dict[str, QueueStats]) -> Iterator[Metric]:
    """Pure: STATS -> metric families, one series per queue ("*": the others summed; as
    queues enter and leave the top its counters can go down: no true counter)."""
    ordered = sorted(stats.values(), key=lambda s: s.queue)
    for name, field, text in COUNTERS:
        counter = CounterMetricFamily(name, text, labels=["queue"])
        for entry in ordered:
            counter.add_metric([entry.queue], float(getattr(entry, field)))
        yield counter
    for name, field, text in GAUGES:
        gauge = GaugeMetricFamily(name, text, labels=["queue"])
        for entry in ordered:
            gauge.add_metric([entry.queue], float(getattr(entry, field)))
        yield gauge


def make_queue_registry(settings: AdminSettings) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueServerCollector(settings))
    registry.register(QueueRolesCollector(settings))
    return registry
