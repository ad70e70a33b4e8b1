"""/metrics families from the queue server's `STATS LATENCY` (queue_server/server/latency.py):
per queue, histograms of wait, run and ready-to-done time and failures by error type.

Pure: the reply's JSON in, metric families out. Every value is a counter since the queue
server started (or since an idle queue was forgotten): nothing is kept here, a restarted
server starts again at 0 and Prometheus's rate() and histogram_quantile() treat that as the
reset it is.

The queue server leaves out a queue it never handed a job from; each configured queue gets
its histograms all the same, at 0, so a Grafana panel or an alert on a new queue reads 0
from the start instead of "no data" until its first hand-out.
"""
from __future__ import annotations

import math
from collections.abc import Collection, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

# (metric family, key in STATS LATENCY, help)
HISTOGRAMS = (
    ("slotmap_queue_wait_seconds", "wait",
     "Time a job waited ready in the queue before it was handed out (each hand-out, retries "
     "included), measured by the queue server."),
    ("slotmap_queue_run_seconds", "run",
     "Time from a job's hand-out to its DONE, measured by the queue server: the slot's run "
     "time plus one GET and one DONE round trip (jobs that failed are not in it)."),
    ("slotmap_queue_ready_to_done_seconds", "ready_to_done",
     "Time from a job becoming ready to its DONE: PUT to DONE for a job neither delayed nor "
     "retried; from the delay's end or the last retry otherwise."),
)
FAILED_BY_TYPE = (
    "slotmap_jobs_failed_by_type",
    "Failed attempts (FAIL, a slot's crash: SlotCrashed, an expired managed lock: LockExpired, a "
    "running job cancelled: Cancelled) by error type (a Python traceback's last `Name:`), since the queue server started; per queue the "
    "first 10 types seen have their own series, later ones count as `other`.")


def _number(value: Any) -> float:
    """A count or sum from the reply, bounded and finite (a bad one reads 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0
    return max(0.0, float(value))


def families(document: dict[str, Any], *, configured: Collection[str] = ()) -> Iterator[Metric]:
    """`configured`: the queues whose histograms are shown, at 0, when the reply has none."""
    bounds = [_number(bound) for bound in document.get("bounds_s", ())]
    queues = document.get("queues", {})
    entries = dict(queues) if isinstance(queues, dict) else {}
    if bounds:  # no bounds: a server without STATS LATENCY, nothing to show a zero in
        zeros = _zero_entry(len(bounds))
        for queue in configured:
            entries.setdefault(queue, zeros)
    ordered = sorted(entries.items())
    for name, key, text in HISTOGRAMS:
        family = HistogramMetricFamily(name, text, labels=["queue"])
        for queue, entry in ordered:
            counts = entry.get(key) if isinstance(entry, dict) else None
            if not isinstance(counts, list) or len(counts) != len(bounds) + 1:
                continue
            family.add_metric([queue], _cumulative(bounds, counts), _number(entry.get(key + "_sum_s")))
        yield family
    failed = CounterMetricFamily(*FAILED_BY_TYPE, labels=["queue", "type"])
    for queue, entry in ordered:
        types = entry.get("error_types") if isinstance(entry, dict) else None
        for kind, count in sorted(types.items()) if isinstance(types, dict) else ():
            failed.add_metric([queue, str(kind)[:100]], _number(count))
    yield failed


def _zero_entry(bound_count: int) -> dict[str, Any]:
    """A queue's STATS LATENCY entry before its first hand-out."""
    entry: dict[str, Any] = {"error_types": {}}
    for _, key, _ in HISTOGRAMS:
        entry[key] = [0] * (bound_count + 1)
        entry[key + "_sum_s"] = 0.0
    return entry


def _cumulative(bounds: list[float], counts: list[Any]) -> list[tuple[str, float]]:
    buckets, total = [], 0.0
    for bound, count in zip([*map(repr, bounds), "+Inf"], counts, strict=True):
        total += _number(count)
        buckets.append((bound, total))
    return buckets
