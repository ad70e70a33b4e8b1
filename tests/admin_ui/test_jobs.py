"""The jobs API and /metrics against a real queue server and a real `slotmap admin` process.

One cluster serves the module (starting one costs more than most tests here): each test
has a queue and job keys of its own, and reads only its own queue's numbers and events.
The test that kills the queue server has a cluster of its own."""
from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from admin_testing import poll_until
from jobs_cluster import TRACEBACK, JobsCluster, jobs_cluster, make_dead
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "jobs-token"
QUEUES = ("photos", "attempts", "retries", "deletes", "counted", "secrets", "later", "bulk")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path_factory.mktemp("jobs"), token=TOKEN, queues=QUEUES) as running:
        yield running


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[JobsCluster]:
    """For a test that breaks its cluster."""
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
        client.put_job("attempts", b"p.jpg", key="flaky-1")
        for attempt in (1, 2, 3):
            [job] = client.get("attempts", keys=True)
            client.fail(job.id, f"Traceback (most recent call last):\nOSError: disk full {attempt}", delay_s=0)
    one = cluster.admin.get("/api/jobs/flaky-1", headers=cluster.auth).json()
    assert [(e["attempt"], e["error_summary"]) for e in one["errors"]] == [
        (n, f"OSError: disk full {n}") for n in (1, 2, 3)]
    listed = cluster.admin.get("/api/queues/attempts/jobs", params={"state": "ready"}, headers=cluster.auth).json()
    assert listed["jobs"][0]["errors"] is None  # lists stay small: one job's page has them
    page = cluster.admin.get("/jobs/flaky-1", headers=cluster.auth).text
    assert "Earlier attempts" in page and 'data-attempt="1"' in page and 'data-attempt="2"' in page
    assert "OSError: disk full 3" in page


def test_retry_needs_the_token_then_brings_the_job_back_ready_and_records_an_event(
    cluster: JobsCluster,
) -> None:
    with cluster.client() as client:
        make_dead(client, "retries", "retry-7")
        url = cluster.admin.url + "/api/queues/retries/jobs/retry"
        assert httpx.post(url, json={"keys": ["retry-7"]}).status_code == 401
        assert client.job("retry-7").state == "dead"  # type: ignore[union-attr]
        answer = httpx.post(url, json={"keys": ["retry-7", "ghost"]}, headers=cluster.auth)
        assert answer.status_code == 200, answer.text
        assert answer.json()["results"] == {"retry-7": "ok", "ghost": "not_found"}
        assert answer.json()["count"] == 1
        info = client.job("retry-7")
        assert info is not None and (info.state, info.attempts) == ("ready", 0)
        [job] = client.get("retries", keys=True)
        assert (job.key, job.attempt) == ("retry-7", 1)
        client.done(job.id)
    [event] = cluster.admin.get("/api/events", params={"kind": "jobs_retried", "queue": "retries"}).json()["events"]
    assert (event["actor"], event["queue"], event["detail"]["keys"]) == ("admin", "retries", ["retry-7", "ghost"])


def test_delete_by_key_and_all_dead_and_bad_requests(cluster: JobsCluster) -> None:
    url = cluster.admin.url + "/api/queues/deletes/jobs/delete"
    with cluster.client() as client:
        for n in range(3):
            make_dead(client, "deletes", f"p{n}")
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
        assert client.jobs("deletes", "dead") == []


def test_an_unreachable_queue_server_is_a_503_with_the_reason(own_cluster: JobsCluster) -> None:
    own_cluster.queue_server.kill()  # type: ignore[attr-defined]
    answer = own_cluster.admin.get("/api/queues/photos/jobs", headers=own_cluster.auth)
    assert answer.status_code == 503
    assert own_cluster.address in answer.json()["detail"]
    page = own_cluster.admin.get("/queues/photos/jobs", headers=own_cluster.auth)
    assert page.status_code == 503 and own_cluster.address in page.text
    assert metric(own_cluster, "slotmap_jobs_dead", "photos") is None
    assert "slotmap_queue_server_up 0.0" in own_cluster.admin.get("/metrics").text


def test_metrics_count_failures_deaths_and_done_jobs_since_the_queue_server_started(
    cluster: JobsCluster,
) -> None:
    with cluster.client() as client:
        make_dead(client, "counted", "counted-7")
        client.put_job("counted", b"flaky", key="flaky-2")
        [job] = client.get("counted", keys=True)
        client.fail(job.id, "OSError: disk full", delay_s=0)
        client.put_many("counted", [b"ok"] * 30)
        taken: list[int] = []

        def take_all() -> bool:  # the 30 good ones and flaky-2, ready again after DELAY 0
            taken.extend(job.id for job in client.get("counted", count=50))
            return len(taken) == 31

        poll_until(take_all, deadline_s=10.0, what="31 jobs handed out")
        client.done(*taken)
    assert metric(cluster, "slotmap_jobs_failed_total", "counted") == 2  # flaky-2 once, counted-7 once
    assert metric(cluster, "slotmap_jobs_died_total", "counted") == 1
    assert metric(cluster, "slotmap_jobs_dead", "counted") == 1
    assert metric(cluster, "slotmap_jobs_done_total", "counted") == 31
    assert metric(cluster, "slotmap_jobs_put_total", "counted") == 32
    assert "slotmap_queue_server_up 1.0" in cluster.admin.get("/metrics").text
    httpx.post(cluster.admin.url + "/api/queues/counted/jobs/retry", json={"all": "dead"}, headers=cluster.auth)
    poll_until(lambda: metric(cluster, "slotmap_jobs_dead", "counted") == 0, deadline_s=10.0,
               what="the dead gauge back to 0 after retry all")
    assert metric(cluster, "slotmap_jobs_retried_total", "counted") == 1


def test_the_find_box_goes_to_the_jobs_page_and_a_bad_key_is_a_clear_error(cluster: JobsCluster) -> None:
    found = cluster.admin.get("/jobs", params={"key": " missing-7 "}, follow_redirects=False)
    assert (found.status_code, found.headers["location"]) == (303, "/jobs/missing-7")
    bad = cluster.admin.get("/jobs", params={"key": "a b"})
    assert bad.status_code == 422 and "is not a job key" in bad.text
    missing = cluster.admin.get("/jobs/missing-7", headers=cluster.auth)
    assert missing.status_code == 404 and "no job &#39;missing-7&#39;" in missing.text


def test_with_a_token_configured_reading_jobs_needs_it_while_counts_stay_open(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        make_dead(client, "secrets", "secret-1", data=b"card 4111")
    for path in ("/api/queues/secrets/jobs?state=dead", "/api/jobs/secret-1"):
        refused = cluster.admin.get(path)
        assert refused.status_code == 401 and "card" not in refused.text
    page = cluster.admin.get("/queues/secrets/jobs?state=dead", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/login?next=")
    assert metric(cluster, "slotmap_jobs_dead", "secrets") == 1
    assert 'data-count="dead">1<' in cluster.admin.get("/queues/secrets").text


def test_a_failed_job_is_counted_under_failed_only_so_each_count_is_as_many_as_its_list(
    cluster: JobsCluster,
) -> None:
    with cluster.client() as client:
        client.put_job("later", b"a", key="later-failed")
        [job] = client.get("later", keys=True)
        client.fail(job.id, TRACEBACK, delay_s=3600)  # failed, waiting an hour for its retry
        client.put_job("later", b"b", key="later-delayed", delay_s=3600)
        assert (client.stats("later")["later"].delayed, client.stats("later")["later"].failed) == (2, 1)
    page = cluster.admin.get("/queues/later", headers=cluster.auth).text
    for state, key in (("delayed", "later-delayed"), ("failed", "later-failed")):
        assert f'data-count="{state}">1<' in page, state  # the queue server's STATS says 2 delayed
        listed = cluster.admin.get(f"/api/queues/later/jobs?state={state}", headers=cluster.auth).json()
        assert [job["key"] for job in listed["jobs"]] == [key]


def test_delete_all_confirmed_for_fewer_dead_jobs_than_there_are_now_asks_again_with_the_new_count(
    cluster: JobsCluster,
) -> None:
    with cluster.client() as client:
        make_dead(client, "bulk", "bulk-1")
    page = cluster.admin.get("/queues/bulk/jobs?state=dead", headers=cluster.auth).text
    assert '<input type="hidden" name="seen" value="1">' in page  # "Delete all dead (1)"
    with cluster.client() as client:
        make_dead(client, "bulk", "bulk-2")  # dies while the operator reads the page
    url = cluster.admin.url + "/queues/bulk/jobs/delete"
    form = {"all": "dead", "state": "dead", "seen": "1", "confirm": "yes"}
    asked = httpx.post(url, data=form, headers=cluster.auth)
    assert asked.status_code == 200 and "The page showed 1; there are 2 now. Delete all 2 dead jobs" in asked.text
    assert '<input type="hidden" name="seen" value="2">' in asked.text
    with cluster.client() as client:
        assert [client.job(key) is not None for key in ("bulk-1", "bulk-2")] == [True, True]
    done = httpx.post(url, data={**form, "seen": "2"}, headers=cluster.auth)
    assert done.status_code == 303 and "deleted=2" in done.headers["location"]


def test_the_api_pages_on_past_jobs_that_left_their_state_between_pages(cluster: JobsCluster) -> None:
    """The audit's case through /api/queues/{q}/jobs and the /api/jobs search: the first
    page's jobs taken, or deleted, before the second page is asked."""
    with cluster.client() as client:
        assert client.put_many("paged", [b"%d" % n for n in range(30)]) == 30
        keys = [info.key for info in client.jobs("paged", "ready", limit=100)]
    url = "/api/queues/paged/jobs"
    first = cluster.admin.get(url, params={"state": "ready", "limit": 10}, headers=cluster.auth).json()
    assert [job["key"] for job in first["jobs"]] == keys[:10] and first["next_after"] == keys[9]
    with cluster.client() as client:
        taken = client.get("paged", count=15, keys=True)
    assert [job.key for job in taken] == keys[:15]
    seen: list[str] = []
    body = first
    while body["next_after"] is not None:
        body = cluster.admin.get(url, headers=cluster.auth, params={
            "state": "ready", "limit": 10, "after": body["next_after"], "at": body["next_at"]}).json()
        seen += [job["key"] for job in body["jobs"]]
    assert seen == keys[15:]

    with cluster.client() as client:
        assert client.fail_many([_DeadFail(job.id) for job in taken]) is not None
    search = {"state": "dead", "queue": "paged", "limit": 5}
    page = cluster.admin.get("/api/jobs", params=search, headers=cluster.auth).json()
    dead_keys = [key for key in reversed(keys[:15])]  # newest first
    assert [job["key"] for job in page["jobs"]] == dead_keys[:5]
    with cluster.client() as client:
        assert client.delete("paged", *dead_keys[:5]) == ["ok"] * 5
    found: list[str] = []
    while page["next_queue"] is not None:
        page = cluster.admin.get("/api/jobs", headers=cluster.auth, params={
            **search, "from_queue": page["next_queue"], "after": page["next_after"], "at": page["next_at"]}).json()
        found += [job["key"] for job in page["jobs"]]
    assert found == dead_keys[5:]
    refused = cluster.admin.get(url, params={"after": keys[0], "at": "no such/position"}, headers=cluster.auth)
    assert refused.status_code == 422


@dataclass(frozen=True)
class _DeadFail:
    id: int
    error: str = "Traceback (most recent call last):\nValueError: gone"
    delay_s: float | None = None
    dead: bool = True
    solo: bool = False


def test_the_queue_pages_next_link_goes_on_after_the_first_pages_jobs_were_taken(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        assert client.put_many("tabs", [b"%d" % n for n in range(150)]) == 150
        keys = [info.key for info in client.jobs("tabs", "ready", limit=1000)]
    page = cluster.admin.get("/queues/tabs/jobs", params={"state": "ready"}, headers=cluster.auth).text
    link = re.search(r'id="next-page" href="([^"]+)"', page)
    assert link is not None and "&amp;at=" in link.group(1)
    with cluster.client() as client:
        assert len(client.get("tabs", count=120)) == 120
    second = cluster.admin.get(html.unescape(link.group(1)), headers=cluster.auth).text
    shown = [key for key in keys if f">{key}<" in second]
    assert shown == keys[120:]
