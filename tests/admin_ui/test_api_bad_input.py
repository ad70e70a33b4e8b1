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
