"""An operator token's job actions are recorded as the operator's, through a real `slotmap
admin` (with an operator_token_file) and a real queue server."""
from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from jobs_cluster import JobsCluster, jobs_cluster, make_dead

ADMIN, OPERATOR = "operator-actions-admin", "operator-actions-operator"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    root = tmp_path_factory.mktemp("operator_actions")
    token_file = root / "operator.token"
    token_file.write_text(OPERATOR + "\n")
    token_file.chmod(0o600)
    with jobs_cluster(root, token=ADMIN, admin_settings=f'operator_token_file = "{token_file}"') as running:
        yield running


def test_an_operators_retry_and_cancel_are_the_operators_in_the_events(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        make_dead(client, "photos", "op-1")
        client.put_job("photos", b"waiting", key="op-2", delay_s=3600)
    operator = {"Authorization": f"Bearer {OPERATOR}"}
    url = cluster.admin.url + "/api/queues/photos/jobs"
    assert httpx.post(f"{url}/retry", json={"keys": ["op-1"]}, headers=operator).status_code == 200
    assert httpx.post(f"{url}/op-2/cancel", headers=operator).status_code == 200
    events = cluster.admin.get("/api/events", headers=operator).json()["events"]
    # Before: actor "admin" and "... by admin through the API", as if the admin token had acted.
    assert [(e["kind"], e["actor"], e["message"]) for e in events] == [
        ("job_cancelled", "operator", "cancel of op-2 of photos (removed) by operator through the API"),
        ("jobs_retried", "operator", "retry of op-1 of photos by operator through the API"),
    ]
