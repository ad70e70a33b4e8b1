"""The jobs search over every queue and the failures by error type, through the JSON API of a
real `slotmap admin` against a real queue server (issue 26)."""
from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from jobs_cluster import JobsCluster, jobs_cluster, make_dead_of

from admin_ui.format import fmt

TOKEN = "search-token"



@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path_factory.mktemp("search_api"), token=TOKEN) as running:
        with running.client() as client:
            for index in range(5):
                make_dead_of(client, "photos", f"photo-{index}", "ValueError: bad photo" if index % 2 else "OSError: disk")
            for index in range(3):
                make_dead_of(client, "thumbs", f"thumb-{index}", "ValueError: bad thumb")
            client.put_job("thumbs", b"waiting", key="thumb-ready")
        yield running


def search(cluster: JobsCluster, **params: object) -> dict[str, object]:
    answer = cluster.admin.get("/api/jobs", params=params, headers=cluster.auth)
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def keys(body: dict[str, object]) -> list[str]:
    return [job["key"] for job in body["jobs"]]  # type: ignore[attr-defined, index]


def test_a_search_covers_every_queue_and_filters_by_prefix_queue_and_error_type(cluster: JobsCluster) -> None:
    assert sorted(keys(search(cluster, state="dead"))) == [
        *[f"photo-{n}" for n in range(5)], *[f"thumb-{n}" for n in range(3)]]
    assert sorted(keys(search(cluster, state="dead", error_type="ValueError"))) == [
        "photo-1", "photo-3", "thumb-0", "thumb-1", "thumb-2"]
    assert sorted(keys(search(cluster, state="dead", queue="photos", error_type="OSError"))) == [
        "photo-0", "photo-2", "photo-4"]
    assert keys(search(cluster, state="dead", prefix="thumb-1")) == ["thumb-1"]
    assert keys(search(cluster, state="ready")) == ["thumb-ready"]
    assert keys(search(cluster, state="dead", since=time.time() + 60)) == []
    assert len(keys(search(cluster, state="dead", since=time.time() - 600, until=time.time() + 1))) == 8


def test_the_error_type_is_found_whatever_case_the_user_types(cluster: JobsCluster) -> None:
    assert sorted(keys(search(cluster, state="dead", error_type="valueerror"))) == [
        "photo-1", "photo-3", "thumb-0", "thumb-1", "thumb-2"]
    page = cluster.admin.get("/jobs", params={"state": "dead", "error_type": "oserror"}, headers=cluster.auth)
    assert page.status_code == 200, page.text[:300]
    assert all(f"photo-{n}" in page.text for n in (0, 2, 4)) and "photo-1" not in page.text


def test_pages_follow_the_cursor_across_queues_without_repeats(cluster: JobsCluster) -> None:
    seen: list[str] = []
    params: dict[str, object] = {"state": "dead", "limit": 3}
    pages = 0
    while True:
        body = search(cluster, **params)
        pages += 1
        assert len(body["jobs"]) <= 3  # type: ignore[arg-type]
        seen += keys(body)
        if body["next_queue"] is None:
            break
        params.update(from_queue=body["next_queue"], after=body["next_after"] or "")
        if body["next_after"] is None:
            params.pop("after")
    assert pages == 3
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 8


def test_bad_search_fields_are_refused_and_jobs_need_the_token(cluster: JobsCluster) -> None:
    assert cluster.admin.get("/api/jobs", params={"state": "bogus"}, headers=cluster.auth).status_code == 422
    assert cluster.admin.get("/api/jobs", params={"prefix": "has space"}, headers=cluster.auth).status_code == 422
    assert cluster.admin.get("/api/jobs", params={"limit": 0}, headers=cluster.auth).status_code == 422
    assert cluster.admin.get("/api/jobs", params={"state": "dead"}).status_code == 401


@pytest.mark.parametrize("params", [
    {"since": "inf"}, {"since": "1e300"}, {"until": "100000000001"}, {"since": "nan"},
    {"since": 2_000_000_000, "until": 1_000}, {"since": 1_000, "until": 1_000},
    {"state": "ready", "since": 1_000}, {"state": "ready", "until": 2_000},
])
def test_times_out_of_range_reversed_or_on_ready_jobs_are_a_422_on_the_api_and_the_page(
        cluster: JobsCluster, params: dict[str, object]) -> None:
    answer = cluster.admin.get("/api/jobs", params=params, headers=cluster.auth)
    assert answer.status_code == 422, answer.text
    page = cluster.admin.get("/jobs", params=params, headers=cluster.auth)
    assert page.status_code == 422, page.text[:300]


def test_the_pages_within_choice_is_left_out_for_ready_jobs_which_have_no_time(cluster: JobsCluster) -> None:
    page = cluster.admin.get("/jobs", params={"state": "ready", "within": "1 h"}, headers=cluster.auth)
    assert page.status_code == 200, page.text[:300]
    assert "thumb-ready" in page.text


def test_failures_are_grouped_by_error_type_with_counts_and_a_sample_traceback(cluster: JobsCluster) -> None:
    answer = cluster.admin.get("/api/failures", headers=cluster.auth)
    assert answer.status_code == 200, answer.text
    groups = {(g["queue"], g["error_type"]): g for g in answer.json()}
    assert {key: g["failed_attempts"] for key, g in groups.items()} == {
        ("photos", "OSError"): 3, ("photos", "ValueError"): 2, ("thumbs", "ValueError"): 3}
    sample = groups[("photos", "OSError")]["sample"]
    assert sample["key"] in ("photo-0", "photo-2", "photo-4") and sample["state"] == "dead"
    assert sample["error"].startswith("Traceback (most recent call last)")
    assert sample["error_summary"] == "OSError: disk"
    only = cluster.admin.get("/api/failures", params={"queue": "thumbs"}, headers=cluster.auth).json()
    assert [(g["queue"], g["error_type"]) for g in only] == [("thumbs", "ValueError")]


def _next_href(page: str) -> str | None:
    found = re.search(r'id="next-page" href="([^"]+)"', page)
    return html.unescape(found.group(1)) if found else None


def test_pages_after_a_within_choice_search_the_window_of_the_first_and_say_so(cluster: JobsCluster) -> None:
    first = cluster.admin.get("/jobs", params={"state": "dead", "within": "1 h", "limit": 3},
                              headers=cluster.auth).text
    href = _next_href(first)
    assert href is not None
    query = parse_qs(urlsplit(href).query)
    # Before: the link kept within=1 h, so each page worked out its own window as it was opened.
    assert "within" not in query
    since = float(query["since"][0])
    assert time.time() - 3600 - 60 < since < time.time() - 3600 + 1
    assert 'id="search-range"' not in first  # the form's own choice shows as chosen
    second = cluster.admin.get(href, headers=cluster.auth).text
    assert 'id="search-range"' in second
    assert fmt(since, "time") in second
    third = _next_href(second)
    assert third is not None and parse_qs(urlsplit(third).query)["since"] == [repr(since)]


def test_a_time_range_given_in_the_address_is_said_on_the_page(cluster: JobsCluster) -> None:
    future = time.time() + 86400
    page = cluster.admin.get("/jobs", params={"state": "dead", "since": future}, headers=cluster.auth).text
    # Before: "No dead jobs match" under a form that said "any time".
    assert 'id="search-range"' in page and f"from {fmt(future, 'time')} UTC" in page
    assert 'id="no-jobs"' in page
