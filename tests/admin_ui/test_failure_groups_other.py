"""The Failures page's `other` group (errors with no type name, as a handler's job.fail("...")
gives) has its sample like any other, through a real `slotmap admin` and queue server."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from jobs_cluster import JobsCluster, jobs_cluster

TOKEN = "failures-other-token"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path_factory.mktemp("failures_other"), token=TOKEN, queues=("letters",)) as running:
        yield running


def test_the_other_group_shows_a_sample_that_its_dead_list_holds(cluster: JobsCluster) -> None:
    with cluster.client() as client:
        client.put_job("letters", b"letter-1", key="letter-1")
        [job] = client.get("letters", keys=True)
        assert client.fail(job.id, "<b>no address</b> on the envelope", dead=True).dead
    [group] = cluster.admin.get("/api/failures", headers=cluster.auth).json()
    assert (group["queue"], group["error_type"], group["failed_attempts"]) == ("letters", "other", 1)
    # Before: no sample ("no dead or failed job of this type kept now") while the group's
    # own "dead" link listed letter-1.
    assert group["sample"] is not None and group["sample"]["key"] == "letter-1"
    listed = cluster.admin.get("/api/jobs", params={"state": "dead", "queue": "letters", "error_type": "other"},
                               headers=cluster.auth).json()
    assert [job["key"] for job in listed["jobs"]] == ["letter-1"]
    page = cluster.admin.get("/failures", headers=cluster.auth).text
    assert 'href="/jobs/letter-1"' in page
    assert "&lt;b&gt;no address&lt;/b&gt;" in page and "<b>no address" not in page
    assert "of this type kept now" not in page
