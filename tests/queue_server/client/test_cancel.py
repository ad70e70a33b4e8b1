"""`slotmap cancel` and CANCEL (PROTOCOL Part B) against a real queue server: a waiting
job is removed, a running one ends dead "cancelled by <door>" and its holder's DONE is
answered as for a lapsed lease; an unknown key is a clear error."""
from __future__ import annotations

from pathlib import Path

import pytest

from queue_server.client import QueueClient
from tests.queue_server.client.test_jobs_cli import slotmap
from tests.queue_server.server_proc import ServerProc, running_queue_server


@pytest.fixture
def server(reused_queue_server) -> ServerProc:  # type: ignore[no-untyped-def]
    return reused_queue_server("--fsync", "never")  # type: ignore[no-any-return]


def test_cancel_a_waiting_job_removes_it(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        client.put_job("photos", b"p1", key="photo-1")
        client.put_job("photos", b"p2", key="photo-2")
        result = slotmap("cancel", "photos", "photo-1", "--server", server.address)
        assert (result.returncode, result.stdout) == (0, "photo-1: removed\n")
        assert client.job("photo-1") is None
        [left] = client.get("photos", keys=True)
        assert left.key == "photo-2"


def test_cancel_a_running_job_ends_it_dead_and_its_done_is_refused(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        client.put_job("photos", b"slow", key="slow-1")
        [job] = client.get("photos", keys=True)
        result = slotmap("cancel", "photos", "slow-1", "--server", server.address)
        assert (result.returncode, result.stdout) == (0, "slow-1: cancelled\n")
        dead = client.job("slow-1", errors=True)
        assert dead is not None and dead.state == "dead"
        assert dead.errors and dead.errors[-1].error == "cancelled by cli"
        # The handler finishing just after the cancel: its DONE finds no lease.
        [answer] = client.done(job.id)
        assert not answer.found
        assert client.job("slow-1").state == "dead"  # type: ignore[union-attr]
        assert client.stats("photos")["photos"].ready == 0  # not run again


def test_cancel_after_done_is_not_found_and_the_job_stays_done(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        client.put_job("photos", b"quick", key="quick-1")
        [job] = client.get("photos", keys=True)
        assert client.done(job.id)[0].found
        assert client.cancel("photos", "quick-1") == "not_found"
        assert client.jobs("photos", "dead") == []
    # The shell says it finished (its queue keeps it as done), not that nothing has that key.
    result = slotmap("cancel", "photos", "quick-1", "--server", server.address)
    assert result.returncode == 1
    assert result.stderr.startswith("slotmap cancel: quick-1 of photos already finished at ")
    assert result.stderr.endswith(" UTC: a finished job cannot be cancelled\n")
    elsewhere = slotmap("cancel", "videos", "quick-1", "--server", server.address)
    assert (elsewhere.returncode, elsewhere.stderr) == (
        1, "slotmap cancel: quick-1: not found in videos (a job quick-1 is in photos)\n")


def test_cancel_an_unknown_key_says_so(server: ServerProc) -> None:
    result = slotmap("cancel", "photos", "nosuch", "--server", server.address)
    assert result.returncode == 1
    assert result.stderr == "slotmap cancel: nosuch: not found in photos (done, deleted, or never put)\n"


def test_cancel_survives_a_restart(tmp_path: Path) -> None:
    """The dead state goes through the journal: a restarted server still has it."""
    data_dir = tmp_path / "data"
    with running_queue_server(tmp_path, data_dir=data_dir) as first, QueueClient(first.address) as client:
        client.put_job("photos", b"slow", key="slow-2")
        client.get("photos", keys=True)
        assert client.cancel("photos", "slow-2") == "cancelled"
    with running_queue_server(tmp_path, data_dir=data_dir) as second, QueueClient(second.address) as client:
        dead = client.job("slow-2", errors=True)
        assert dead is not None and dead.state == "dead"
        assert dead.errors and dead.errors[-1].error == "cancelled by client"  # a bare client sent no CLIENT NAME
