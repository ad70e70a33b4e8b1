"""Failures grouped by error type (issue 26): per queue, the failed attempts of each type the
queue server counted since it started (STATS LATENCY, the same counts as /metrics'
slotmap_jobs_failed_by_type), each with a sample: the newest dead (else failed) job whose
last error has that type, found by a bounded JOBS search."""
from __future__ import annotations

from typing import Any, Final

from admin_ui.jobs import job_view
from admin_ui.queue_link import ask
from admin_ui.schemas import JobView
from admin_ui.search_schemas import FailureGroup
from admin_ui.settings import AdminSettings
from queue_server.client import QueueClient

# The queues STATS LATENCY is asked about at once (its request line stays short).
QUEUES_PER_PAGE: Final = 100
# Samples are looked up for the largest groups only: one or two bounded searches each.
MAX_SAMPLES: Final = 40
SAMPLE_SCAN: Final = 5_000


def _counts(document: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(queue, error type, count), largest first."""
    rows: list[tuple[str, str, int]] = []
    queues = document.get("queues")
    for queue, entry in (queues.items() if isinstance(queues, dict) else ()):
        types = entry.get("error_types") if isinstance(entry, dict) else None
        for kind, count in (types.items() if isinstance(types, dict) else ()):
            if isinstance(count, int) and count > 0:
                rows.append((str(queue), str(kind), count))
    return sorted(rows, key=lambda row: (-row[2], row[0], row[1]))


def _sample(client: QueueClient, queue: str, kind: str) -> JobView | None:
    # `other` too: the search finds the errors with no type name (a handler's job.fail("...")
    # text), which the group counts; the group's types past a queue's first 10 it cannot.
    for state in ("dead", "failed"):
        page = client.search_jobs(queue, state, limit=1, error_type=kind, scan=SAMPLE_SCAN)
        if page.jobs:
            return job_view(page.jobs[0])
    return None


def _groups(client: QueueClient, queue: str | None) -> list[FailureGroup]:
    names = [queue] if queue is not None else sorted(name for name in client.stats() if name != "*")
    rows: list[tuple[str, str, int]] = []
    for start in range(0, len(names), QUEUES_PER_PAGE):
        rows += _counts(client.stats_latency(names[start:start + QUEUES_PER_PAGE]))
    rows.sort(key=lambda row: (-row[2], row[0], row[1]))
    return [FailureGroup(queue=name, error_type=kind, failed_attempts=count,
                         sample=_sample(client, name, kind) if index < MAX_SAMPLES else None,
                         sampled=index < MAX_SAMPLES)
            for index, (name, kind, count) in enumerate(rows)]


def failure_groups(settings: AdminSettings, queue: str | None = None) -> list[FailureGroup]:
    """Every (queue, error type) with failed attempts, largest first, each with a sample job."""
    return ask(settings, lambda client: _groups(client, queue))
