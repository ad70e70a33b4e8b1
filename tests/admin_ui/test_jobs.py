"""The jobs API and /metrics against a real queue server and a real `slotmap admin` process."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from admin_testing import poll_until
from jobs_cluster import TRACEBACK, JobsCluster, jobs_cluster, make_dead
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "jobs-token"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path, token=TOKEN) as running:
        yield running


def metric(cluster: JobsCluster, name: str, queue: str) -> float | None:
    for family in text_string_to_metric_families(cluster.admin.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and sample.labels == {"queue": queue}:
                return float(sample.value)
    return None


def test_the_api_lists_a_dead_job_with_its_error_and_finds_it_by_key(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        make_dead(client, "photos", "photo-7")
    body = cluster.admin.get("/api/queues/photos/jobs", params={"state": "dead"}, headers=cluster.auth).json()
    assert (body["queue"], body["state"], body["next_after"]) == ("photos", "dead", None)
    assert body["counts"]["dead"] == 1 and body["counts"]["ready"] == 0
    [job] = body["jobs"]
    assert (job["key"], job["state"], job["attempts"], job["data"]) == ("photo-7", "dead", 1, "photo-7.jpg")
    assert job["error"] == TRACEBACK
    assert job["error_summary"] == "ValueError: bad photo 7"
    assert job["died_at"] is not None
    one = cluster.admin.get("/api/jobs/photo-7", headers=cluster.auth).json()
    assert {k: one[k] for k in ("key", "queue", "state", "error")} == {
        "key": "photo-7", "queue": "photos", "state": "dead", "error": TRACEBACK}
    missing = cluster.admin.get("/api/jobs/nope", headers=cluster.auth)
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]


def test_one_job_shows_the_errors_of_its_last_attempts_on_the_api_and_its_page(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        client.put_job("photos", b"p.jpg", key="flaky-1")
        for attempt in (1, 2, 3):
            [job] = client.get("photos", keys=True)
            client.fail(job.id, f"Traceback (most recent call last):\nOSError: disk full {attempt}", delay_s=0)
    one = cluster.admin.get("/api/jobs/flaky-1", headers=cluster.auth).json()
    assert [(e["attempt"], e["error_summary"]) for e in one["errors"]] == [
        (n, f"OSError: disk full {n}") for n in (1, 2, 3)]
    listed = cluster.admin.get("/api/queues/photos/jobs", params={"state": "ready"}, headers=cluster.auth).json()
    assert listed["jobs"][0]["errors"] is None  # lists stay small: one job's page has them
    page = cluster.admin.get("/jobs/flaky-1", headers=cluster.auth).text
    assert "Earlier attempts" in page and 'data-attempt="1"' in page and 'data-attempt="2"' in page
    assert "OSError: disk full 3" in page


def test_retry_needs_the_token_then_brings_the_job_back_ready_and_records_an_event(
    cluster: JobsCluster,
) -> None:
    with cluster.client() as client:
        make_dead(client, "photos", "photo-7")
        url = cluster.admin.url + "/api/queues/photos/jobs/retry"
        assert httpx.post(url, json={"keys": ["photo-7"]}).status_code == 401
        assert client.job("photo-7").state == "dead"  # type: ignore[union-attr]
        answer = httpx.post(url, json={"keys": ["photo-7", "ghost"]}, headers=cluster.auth)
        assert answer.status_code == 200, answer.text
        assert answer.json()["results"] == {"photo-7": "ok", "ghost": "not_found"}
        assert answer.json()["count"] == 1
        info = client.job("photo-7")
        assert info is not None and (info.state, info.attempts) == ("ready", 0)
        [job] = client.get("photos", keys=True)
        assert (job.key, job.attempt) == ("photo-7", 1)
        client.done(job.id)
    [event] = cluster.admin.get("/api/events", params={"kind": "jobs_retried"}).json()["events"]
    assert (event["actor"], event["queue"], event["detail"]["keys"]) == ("admin", "photos", ["photo-7", "ghost"])


def test_delete_by_key_and_all_dead_and_bad_requests(cluster: JobsCluster) -> None:
    url = cluster.admin.url + "/api/queues/photos/jobs/delete"
    with cluster.client() as client:
        for n in range(3):
            make_dead(client, "photos", f"p{n}")
        one = httpx.post(url, json={"keys": ["p0"]}, headers=cluster.auth).json()
        assert (one["results"], one["count"]) == ({"p0": "ok"}, 1)
        assert client.job("p0") is None
        both = httpx.post(url, json={"keys": ["p1"], "all": "dead"}, headers=cluster.auth)
        assert both.status_code == 422 and "not both" in both.json()["detail"]
        failed_all = httpx.post(url, json={"all": "failed"}, headers=cluster.auth)
        assert failed_all.status_code == 422
        bad_key = httpx.post(url, json={"keys": ["no spaces"]}, headers=cluster.auth)
        assert bad_key.status_code == 422
        every = httpx.post(url, json={"all": "dead"}, headers=cluster.auth).json()
        assert every["count"] == 2
        assert client.jobs("photos", "dead") == []


def test_an_unreachable_queue_server_is_a_503_with_the_reason(cluster: JobsCluster) -> None:
    cluster.queue_server.kill()  # type: ignore[attr-defined]
    answer = cluster.admin.get("/api/queues/photos/jobs", headers=cluster.auth)
    assert answer.status_code == 503
    assert cluster.address in answer.json()["detail"]
    page = cluster.admin.get("/queues/photos/jobs", headers=cluster.auth)
    assert page.status_code == 503 and cluster.address in page.text
    assert metric(cluster, "slotmap_jobs_dead", "photos") is None
    assert "slotmap_queue_server_up 0.0" in cluster.admin.get("/metrics").text


def test_metrics_count_failures_deaths_and_done_jobs_since_the_queue_server_started(
    cluster: JobsCluster,
) -> None:
    with cluster.client() as client:
        make_dead(client, "photos", "photo-7")
        client.put_job("photos", b"flaky", key="flaky-1")
        [job] = client.get("photos", keys=True)
        client.fail(job.id, "OSError: disk full", delay_s=0)
        client.put_many("photos", [b"ok"] * 30)
        taken: list[int] = []

        def take_all() -> bool:  # the 30 good ones and flaky-1, ready again after DELAY 0
            taken.extend(job.id for job in client.get("photos", count=50))
            return len(taken) == 31

        poll_until(take_all, deadline_s=10.0, what="31 jobs handed out")
        client.done(*taken)
    assert metric(cluster, "slotmap_jobs_failed_total", "photos") == 2  # flaky-1 once, photo-7 once
    assert metric(cluster, "slotmap_jobs_died_total", "photos") == 1
    assert metric(cluster, "slotmap_jobs_dead", "photos") == 1
    assert metric(cluster, "slotmap_jobs_done_total", "photos") == 31
    assert metric(cluster, "slotmap_jobs_put_total", "photos") == 32
    assert "slotmap_queue_server_up 1.0" in cluster.admin.get("/metrics").text
    httpx.post(cluster.admin.url + "/api/queues/photos/jobs/retry", json={"all": "dead"}, headers=cluster.auth)
    poll_until(lambda: metric(cluster, "slotmap_jobs_dead", "photos") == 0, deadline_s=10.0,
               what="the dead gauge back to 0 after retry all")
    assert metric(cluster, "slotmap_jobs_retried_total", "photos") == 1


def test_the_find_box_goes_to_the_jobs_page_and_a_bad_key_is_a_clear_error(cluster: JobsCluster) -> None:
    found = cluster.admin.get("/jobs", params={"key": " photo-7 "}, follow_redirects=False)
    assert (found.status_code, found.headers["location"]) == (303, "/jobs/photo-7")
    bad = cluster.admin.get("/jobs", params={"key": "a b"})
    assert bad.status_code == 422 and "is not a job key" in bad.text
    missing = cluster.admin.get("/jobs/photo-7", headers=cluster.auth)
    assert missing.status_code == 404 and "no job &#39;photo-7&#39;" in missing.text


def test_with_a_token_configured_reading_jobs_needs_it_while_counts_stay_open(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        make_dead(client, "photos", "secret-1", data=b"card 4111")
    for path in ("/api/queues/photos/jobs?state=dead", "/api/jobs/secret-1"):
        refused = cluster.admin.get(path)
        assert refused.status_code == 401 and "card" not in refused.text
    page = cluster.admin.get("/queues/photos/jobs?state=dead", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/login?next=")
    assert metric(cluster, "slotmap_jobs_dead", "photos") == 1
    assert 'data-count="dead">1<' in cluster.admin.get("/queues/photos").text
