"""Paging through JOBS while jobs leave the state between pages (PROTOCOL.md Part B, JOBS
positions), on a real server: the next page goes on past the last row's position, so a job
that left is simply not shown, none is shown twice, and the listing never ends early.

The audit's cases: 300 ready jobs, page 1 of 100 read, then a slot took 150 (page 2 was empty
while 150 were ready); 300 dead jobs, the 50 of page 1 deleted (page 2 was empty while 250
were dead)."""
from __future__ import annotations

import socket
from dataclasses import dataclass

import pytest

from queue_server.client import QueueClient
from queue_server.protocol.job_info import JobInfo


@dataclass(frozen=True)
class _Fail:
    id: int
    error: str = "Traceback (most recent call last):\nValueError: bad"
    delay_s: float | None = None
    dead: bool = True
    solo: bool = False


@pytest.fixture
def server(start_queue_server):  # type: ignore[no-untyped-def]
    return start_queue_server("--fsync", "never")


@pytest.fixture
def client(server):  # type: ignore[no-untyped-def]
    with QueueClient(f"127.0.0.1:{server.port}") as connected:
        yield connected


def _put(client: QueueClient, queue: str, count: int) -> list[str]:
    """`count` ready jobs; their keys in hand-out order."""
    assert client.put_many(queue, [b"job %d" % n for n in range(count)]) == count
    return [info.key for info in client.jobs(queue, "ready", limit=1000)]


def _dead(client: QueueClient, queue: str, count: int) -> list[str]:
    """`count` dead jobs; their keys newest first (the dead listing's order)."""
    _put(client, queue, count)
    jobs = client.get(queue, count=count, keys=True)
    assert len(jobs) == count
    assert all(outcome is not None and outcome.dead for outcome in client.fail_many([_Fail(job.id) for job in jobs]))
    return [job.key for job in reversed(jobs)]  # type: ignore[misc]


def _rest(client: QueueClient, queue: str, state: str, last: JobInfo, limit: int) -> list[str]:
    """Every page after `last`, each going on at the position of the page before's last row."""
    keys: list[str] = []
    while True:
        page = client.jobs(queue, state, limit=limit, after=last.key, at=last.position)
        keys += [info.key for info in page]
        if len(page) < limit:
            return keys
        last = page[-1]


def test_ready_page_two_goes_on_after_a_slot_took_the_jobs_of_page_one_and_more(client: QueueClient) -> None:
    keys = _put(client, "resize", 300)
    first = client.jobs("resize", "ready", limit=100)
    assert [info.key for info in first] == keys[:100]
    assert len(client.get("resize", count=150)) == 150  # page 1's jobs and 50 after them
    second = client.jobs("resize", "ready", limit=100, after=first[-1].key, at=first[-1].position)
    assert [info.key for info in second] == keys[150:250]
    assert _rest(client, "resize", "ready", first[-1], 100) == keys[150:]
    # The key alone (a client older than positions) still reads as it did: that job is gone.
    assert client.jobs("resize", "ready", limit=100, after=first[-1].key) == []


def test_dead_page_two_goes_on_after_the_jobs_of_page_one_were_deleted(client: QueueClient) -> None:
    keys = _dead(client, "thumbs", 300)
    first = client.jobs("thumbs", "dead", limit=50)
    assert [info.key for info in first] == keys[:50]
    assert client.delete("thumbs", *keys[:50]) == ["ok"] * 50
    rest = _rest(client, "thumbs", "dead", first[-1], 100)
    assert rest == keys[50:] and len(set(rest)) == 250
    assert client.jobs("thumbs", "dead", limit=100, after=first[-1].key) == []


def test_a_dead_search_goes_on_at_its_position_after_its_last_job_was_deleted(client: QueueClient) -> None:
    keys = _dead(client, "thumbs", 120)
    page = client.search_jobs("thumbs", "dead", limit=50, error_type="ValueError")
    assert [info.key for info in page.jobs] == keys[:50] and page.after == keys[49]
    assert page.position is not None
    assert client.delete("thumbs", *keys[:50]) == ["ok"] * 50
    found: list[str] = []
    while page.after is not None:
        page = client.search_jobs("thumbs", "dead", limit=50, after=page.after, at=page.position,
                                  error_type="ValueError")
        found += [info.key for info in page.jobs]
    assert found == keys[50:]


def test_running_page_two_goes_on_after_the_jobs_of_page_one_finished(client: QueueClient) -> None:
    _put(client, "encode", 30)
    jobs = client.get("encode", count=30)
    first = client.jobs("encode", "running", limit=10)
    assert [info.lease_id for info in first] == [job.id for job in jobs[:10]]
    assert all(result.found for result in client.done(*[job.id for job in jobs[:15]]))
    rest = _rest(client, "encode", "running", first[-1], 10)
    assert rest == [info.key for info in client.jobs("encode", "running", limit=100)]
    assert len(rest) == 15


def test_delayed_page_two_goes_on_after_the_jobs_of_page_one_were_deleted(client: QueueClient) -> None:
    keys = [client.put_job("later", b"x", delay_s=3600 + n, key=f"later-{n}").key for n in range(30)]
    first = client.jobs("later", "delayed", limit=10)
    assert [info.key for info in first] == keys[:10]
    assert client.delete("later", *keys[:12]) == ["ok"] * 12
    assert _rest(client, "later", "delayed", first[-1], 10) == keys[12:]


def test_ready_jobs_deleted_out_of_the_line_move_no_other_job(client: QueueClient) -> None:
    keys = _put(client, "resize", 40)
    first = client.jobs("resize", "ready", limit=20)
    # One before the page's end and one after it, out of the middle of the line; then the
    # page's jobs are taken: page 2 is placed by the position of keys[19] alone.
    assert client.delete("resize", keys[5], keys[25]) == ["ok"] * 2
    assert [job.key for job in client.get("resize", count=19, keys=True)] == keys[:5] + keys[6:20]
    assert _rest(client, "resize", "ready", first[-1], 7) == keys[20:25] + keys[26:]


def test_a_position_that_is_no_position_is_refused(server, client: QueueClient) -> None:  # type: ignore[no-untyped-def]
    _put(client, "resize", 2)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        for line in (b"JOBS resize ready AT 1\r\n",  # AT without AFTER
                     b"JOBS resize ready AFTER _1 AT 12\r\n",  # not a ready job's position
                     b"JOBS resize dead AFTER _1 AT ab:x:1.5\r\n",
                     b"JOBS resize running AFTER _1 AT 1:2\r\n"):
            sock.sendall(line)
            assert sock.recv(200).startswith(b"400 "), line
