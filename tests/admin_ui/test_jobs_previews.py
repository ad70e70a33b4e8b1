"""The jobs lists show the start of a job's data and result: one cut there says so, with its
whole size (a real `slotmap admin` and queue server)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from jobs_cluster import JobsCluster, jobs_cluster

TOKEN = "previews-token"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path_factory.mktemp("previews"), token=TOKEN, queues=("reports",)) as running:
        with running.client() as client:
            client.put_job("reports", b"D" * 3000, key="report-big")
            client.put_job("reports", b"small", key="report-small")
            for job in client.get("reports", keys=True, count=2):
                result = "R" * 5000 if job.key == "report-big" else "ok"
                assert client.done_with_result(job.id, result).found
        yield running


@pytest.mark.parametrize("path", ["/queues/reports/jobs?state=done", "/jobs?state=done&queue=reports"])
def test_a_result_or_data_cut_in_a_list_says_so_with_its_size(cluster: JobsCluster, path: str) -> None:
    page = cluster.admin.get(path, headers=cluster.auth).text
    big = page[page.index('<tr data-key="report-big">'):]
    big = big[:big.index("</tr>")]
    # Before: 120 R's (or D's on the Jobs page) that read as the whole result.
    assert 'data-cut="result">&hellip; (4.9 KiB)' in big
    assert 'data-cut="data">&hellip; (2.9 KiB)' in big
    small = page[page.index('<tr data-key="report-small">'):]
    assert "data-cut" not in small[:small.index("</tr>")]
