"""POST /api/queues/<q>/jobs/<key>/cancel against a real queue server and `slotmap admin`.

One cluster for the module (with operator and viewer tokens besides the admin's): each test
has a queue of its own and reads only its own queue's events."""
from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from jobs_cluster import JobsCluster, jobs_cluster

TOKEN = "cancel-token"
TOKENS = {"operator": "cancel-operator-token", "viewer": "cancel-viewer-token"}
QUEUES = ("photos", "waiting", "roles", "forms")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    root = tmp_path_factory.mktemp("job_cancel")
    lines = []
    for role, value in TOKENS.items():
        path = root / f"{role}.token"
        path.write_text(value)
        path.chmod(0o600)
        lines.append(f'{role}_token_file = "{path}"')
    with jobs_cluster(root, token=TOKEN, admin_settings="\n".join(lines) + "\n", queues=QUEUES) as running:
        yield running


def test_the_api_cancels_a_running_job_with_the_token_and_records_an_event(cluster: JobsCluster) -> None:
    url = cluster.admin.url + "/api/queues/photos/jobs/slow-1/cancel"
    with cluster.client() as client:
        client.put_job("photos", b"slow", key="slow-1")
        [job] = client.get("photos", keys=True)
        assert httpx.post(url).status_code == 401  # no token: refused, the job runs on
        assert client.job("slow-1").state == "running"  # type: ignore[union-attr]
        answer = httpx.post(url, headers=cluster.auth)
        assert answer.status_code == 200, answer.text
        assert answer.json()["results"] == {"slow-1": "cancelled"}
        dead = client.job("slow-1", errors=True)
        assert dead is not None and dead.state == "dead" and dead.error == "cancelled by api"
        assert not client.done(job.id)[0].found
    [event] = cluster.admin.get("/api/events", params={"kind": "job_cancelled", "queue": "photos"}).json()["events"]
    assert (event["queue"], event["detail"]["door"], event["detail"]["key"]) == ("photos", "api", "slow-1")


def test_the_api_removes_a_waiting_job_and_a_missing_one_is_404(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        client.put_job("photos", b"later", key="wait-1")
        answer = httpx.post(cluster.admin.url + "/api/queues/photos/jobs/wait-1/cancel", headers=cluster.auth)
        assert answer.json()["results"] == {"wait-1": "removed"}
        assert client.job("wait-1") is None
    missing = httpx.post(cluster.admin.url + "/api/queues/waiting/jobs/ghost/cancel", headers=cluster.auth)
    assert missing.status_code == 404 and "ghost" in missing.json()["detail"]


def test_the_api_says_a_finished_job_finished_rather_than_not_found(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        client.put_job("photos", b"quick", key="quick-1")
        [job] = client.get("photos", keys=True)
        assert client.done(job.id)[0].found
    finished = httpx.post(cluster.admin.url + "/api/queues/photos/jobs/quick-1/cancel", headers=cluster.auth)
    assert finished.status_code == 409, finished.text
    assert "already finished at " in finished.json()["detail"]
    elsewhere = httpx.post(cluster.admin.url + "/api/queues/other/jobs/quick-1/cancel", headers=cluster.auth)
    assert elsewhere.status_code == 404 and "is in photos" in elsewhere.json()["detail"]


def test_the_operator_token_cancels_and_the_viewer_token_is_refused(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        url = cluster.admin.url + "/api/queues/roles/jobs/slow-2/cancel"
        client.put_job("roles", b"slow", key="slow-2")
        client.get("roles", keys=True)
        refused = httpx.post(url, headers={"Authorization": f"Bearer {TOKENS['viewer']}"})
        assert refused.status_code == 403, refused.text
        assert client.job("slow-2").state == "running"  # type: ignore[union-attr]
        answer = httpx.post(url, headers={"Authorization": f"Bearer {TOKENS['operator']}"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["results"] == {"slow-2": "cancelled"}
        assert client.job("slow-2").error == "cancelled by api"  # type: ignore[union-attr]


def test_the_dashboard_form_asks_to_confirm_without_javascript(cluster: JobsCluster) -> None:
    url = cluster.admin.url + "/queues/forms/jobs/slow-3/cancel"
    with cluster.client() as client:
        client.put_job("forms", b"slow", key="slow-3")
        client.get("forms", keys=True)
        asked = httpx.post(url, headers=cluster.auth)
        assert asked.status_code == 200 and 'id="confirm-question"' in asked.text
        assert '<input type="hidden" name="confirm" value="yes">' in asked.text
        assert client.job("slow-3").state == "running"  # type: ignore[union-attr]
        done = httpx.post(url, data={"confirm": "yes"}, headers=cluster.auth)
        assert done.status_code == 303 and done.headers["location"] == "/jobs/slow-3"
        assert client.job("slow-3").error == "cancelled by dashboard"  # type: ignore[union-attr]
