"""/metrics with many queues (issue 16, point 11): the queue server's counters come as the
TOP_QUEUES queues holding the most jobs plus one series `queue="*"` for all the others
summed, read with `STATS TOP` (50,000 queues made /metrics 30 MB in 10.6 s). Fails on
f5016ee: every queue had its own series. A configured queue keeps its own series however
few jobs it holds (on 4cfd2df an empty one fell into "*" beside 200 fuller queues)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from jobs_cluster import JobsCluster, jobs_cluster
from prometheus_client.parser import text_string_to_metric_families

from admin_ui.queue_metrics import OTHERS, TOP_QUEUES

TOKEN = "metrics-many-token"
SMALL = 1000  # queues of one job each, beyond the top


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path, token=TOKEN) as running:
        yield running


def _puts(text: str) -> dict[str, float]:
    return {sample.labels["queue"]: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "slotmap_jobs_put_total"}


def test_metrics_show_the_top_queues_and_the_others_summed(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        client.put_many("photos", [b"p"] * 5)
        for index in range(SMALL):
            client.put(f"small{index}", b"x")
    response = cluster.admin.get("/metrics")
    assert response.status_code == 200
    put = _puts(response.text)
    assert len(put) == TOP_QUEUES + 1
    assert put["photos"] == 5  # the fullest queue has its own series
    assert put[OTHERS] == SMALL + 1 - TOP_QUEUES
    assert sum(put.values()) == SMALL + 5


def test_a_configured_queue_keeps_its_series_when_it_holds_no_jobs(tmp_path: Path) -> None:
    with jobs_cluster(tmp_path, token=TOKEN, queues=("photos", "quiet")) as cluster:
        with cluster.client() as client:
            client.put_many("quiet", [b"q"] * 3)
            jobs = client.get("quiet", count=3)
            client.done(*(job.id for job in jobs))
            for index in range(SMALL):
                client.put(f"small{index}", b"x")
        response = cluster.admin.get("/metrics")
        assert response.status_code == 200
        text = response.text
    put = _puts(text)
    assert put["quiet"] == 3  # holds no job: ranked among the top it would be in "*"
    assert put["photos"] == 0  # configured, never used: all zeros, a series from the start
    assert len(put) == TOP_QUEUES + 3
    assert put[OTHERS] == SMALL - TOP_QUEUES  # "*" does not count the configured ones again
    assert sum(put.values()) == SMALL + 3
    done = {sample.labels["queue"]: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "slotmap_queue_run_seconds_count"}
    assert done["quiet"] == 3  # its histograms too
