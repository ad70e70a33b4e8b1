"""The Failures page's samples, through a real `slotmap admin` and queue server: the `other`
group (errors with no type name, as a handler's job.fail("...") gives) has one like any
other, and a group past the sampled ones does not claim that none of its jobs is kept."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from jobs_cluster import JobsCluster, jobs_cluster

TOKEN = "failures-other-token"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path_factory.mktemp("failures_samples"), token=TOKEN, queues=("letters",)) as running:
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


def test_groups_past_the_sampled_ones_say_their_sample_was_not_looked_up(cluster: JobsCluster) -> None:
    # 5 queues x 9 types, one dead job each: 45 groups of one failed attempt, past MAX_SAMPLES (40).
    with cluster.client() as client:
        for queue_index in range(5):
            for type_index in range(9):
                key = f"m{queue_index}-{type_index}"
                client.put_job(f"many{queue_index}", key.encode(), key=key)
                [job] = client.get(f"many{queue_index}", keys=True)
                assert client.fail(job.id, f"Traceback\nError{type_index}: {key}", dead=True).dead
    # Largest first, then by queue and type: many4's Error8 is past the first 40.
    page = cluster.admin.get("/failures", headers=cluster.auth).text
    row = page[page.index('<tr data-key="many4:Error8">'):]
    row = row[:row.index("</tr>")]
    # Before: "no dead or failed job of this type kept now", while its dead list held one.
    assert "data-unsampled" in row and "kept now" not in row
    listed = cluster.admin.get("/api/jobs", headers=cluster.auth, params={
        "state": "dead", "queue": "many4", "error_type": "Error8"}).json()
    assert [job["key"] for job in listed["jobs"]] == ["m4-8"]
    groups = [g for g in cluster.admin.get("/api/failures", headers=cluster.auth).json()
              if g["queue"].startswith("many")]
    assert len(groups) == 45
    unsampled = [(g["queue"], g["error_type"]) for g in groups if not g["sampled"]]
    assert ("many4", "Error8") in unsampled
    assert all(g["sample"] is None for g in groups if not g["sampled"])
    assert all(g["sample"] is not None for g in groups if g["sampled"])
