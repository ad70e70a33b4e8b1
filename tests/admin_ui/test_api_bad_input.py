"""Bad parameters and bodies get a clear 4xx from the JSON API of a real `slotmap admin` (with
a real queue server), never a 500 nor a quiet empty answer."""
from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from jobs_cluster import JobsCluster, jobs_cluster

TOKEN = "bad-input-token"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path_factory.mktemp("bad_input"), token=TOKEN) as running:
        yield running


def send(cluster: JobsCluster, method: str, path: str, body: bytes) -> httpx.Response:
    return httpx.request(method, cluster.admin.url + path, content=body, timeout=5.0,
                         headers={**cluster.auth, "Content-Type": "application/json"})


@pytest.mark.parametrize(("method", "path", "body"), [
    ("PUT", "/api/queues/photos/limits", b'{"min_slots": 1e400}'),
    ("PUT", "/api/queues/photos/limits", b'{"max_slots": NaN}'),
    ("PUT", "/api/queues/photos/limits", b'{"min_slots": -Infinity}'),
    ("POST", "/api/queues/photos/jobs/retry", b'{"keys": [1e999]}'),
    ("POST", "/api/queues/photos/jobs/delete", b'{"all": NaN}'),
])
def test_a_number_json_cannot_encode_in_a_body_is_a_422_that_quotes_it(
    cluster: JobsCluster, method: str, path: str, body: bytes,
) -> None:
    # Before: FastAPI's 422 quoted the input back as inf or nan, failed to encode it: 500.
    answer = send(cluster, method, path, body)
    assert answer.status_code == 422, answer.text
    [error] = answer.json()["detail"]
    assert error["input"] in ("inf", "-inf", "nan")


@pytest.mark.parametrize("params", [
    {"since_unix": "nan"}, {"until_unix": "nan"}, {"since_unix": "1e400"}, {"until_unix": "-inf"},
])
def test_an_events_time_that_is_no_number_is_a_422_not_an_empty_list(
    cluster: JobsCluster, params: dict[str, str],
) -> None:
    # Before: 200 with no events (nothing compares with nan) and the filter shown as null.
    answer = cluster.admin.get("/api/events", params=params, headers=cluster.auth)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["type"] == "finite_number"


def test_a_reversed_events_range_is_a_422_on_the_api_and_says_so_on_the_page(cluster: JobsCluster) -> None:
    # Before: 200 and "No events match", as if the cluster had been quiet then.
    answer = cluster.admin.get("/api/events", params={"since_unix": 2_000, "until_unix": 1_000},
                               headers=cluster.auth)
    assert answer.status_code == 422, answer.text
    assert "since (1970-01-01 00:33:20 UTC) is after until (1970-01-01 00:16:40 UTC)" in answer.json()["detail"]
    page = cluster.admin.get("/events", params={"since": "2026-11-29T15:00", "until": "2026-11-29T14:00"},
                             headers=cluster.auth)
    assert page.status_code == 422
    assert "since (2026-11-29 15:00:00 UTC) is after until (2026-11-29 14:00:00 UTC)" in page.text
    # A range of one instant is no mistake (until is inclusive), nor is an offset other than UTC's.
    for params in ({"since": "2026-11-29T14:00", "until": "2026-11-29T14:00"},
                   {"since": "2026-11-29T15:00+05:00", "until": "2026-11-29T14:00"}):
        assert cluster.admin.get("/events", params=params, headers=cluster.auth).status_code == 200
