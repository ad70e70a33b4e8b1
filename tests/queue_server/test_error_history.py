"""A job keeps the errors of its last failed attempts (issue 15): JOB ... ERRORS shows them,
and they survive the log, a snapshot, CLONE and replication; a plain JOB is unchanged."""
from __future__ import annotations

import json
import zlib

from polling import DEADLINE_S
from util import poll_until

from queue_server.client import QueueClient
from queue_server.protocol.job_info import JobInfo

MANY_ATTEMPTS = """
[queues.q]
max_attempts = 9
retry_base_s = 0
retry_max_s = 0
"""


def _client(server) -> QueueClient:  # type: ignore[no-untyped-def]
    return QueueClient(f"127.0.0.1:{server.port}")


def _fail_times(client: QueueClient, key: str, times: int, error: str = "boom") -> None:
    """Run and fail the job `times` times (retry_base_s 0: it is ready again at once)."""
    for n in range(1, times + 1):
        [job] = poll_until(lambda: client.get("q", keys=True), timeout_s=DEADLINE_S)
        assert (job.key, job.attempt) == (key, n)
        client.fail(job.id, f"{error} {n}\n" + "x" * (3000 if n == 1 else 10))


def _attempts(info: JobInfo | None) -> list[int]:
    assert info is not None and info.errors is not None
    return [entry.attempt for entry in info.errors]


def test_a_job_keeps_the_errors_of_its_last_five_attempts_the_older_ones_cut(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = start_queue_server("--fsync", "always", config=MANY_ATTEMPTS)
    with _client(server) as client:
        client.put("q", b"x", key="k")
        _fail_times(client, "k", 2)
        two = client.job("k", errors=True)
        assert _attempts(two) == [1, 2]
        assert two is not None and two.errors is not None
        first = two.errors[0].error
        assert first.startswith("[... cut: the error was 3007 bytes, the last 2048 are kept]")
        assert len(first.encode()) < 2200  # an earlier error is cut to its end
        assert two.errors[1].error.startswith("boom 2") and two.error == two.errors[1].error
        for n in range(3, 8):  # attempts 3..7
            [job] = poll_until(lambda: client.get("q", keys=True), timeout_s=DEADLINE_S)
            assert job.attempt == n
            client.fail(job.id, f"boom {n}")
        info = client.job("k", errors=True)
        assert _attempts(info) == [3, 4, 5, 6, 7]
        assert info is not None and info.errors is not None
        assert all(entry.at > 0 for entry in info.errors)
        assert client.job("k").errors is None  # type: ignore[union-attr]  # only when asked
    server.kill()
    restarted = start_queue_server("--fsync", "always", config=MANY_ATTEMPTS, data_dir=server.data_dir)
    with _client(restarted) as client:  # replayed from the log
        assert _attempts(client.job("k", errors=True)) == [3, 4, 5, 6, 7]


def test_a_plain_job_request_gets_no_errors_key_and_job_errors_lists_them(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    raw = start_queue_server("--fsync", "never", config=MANY_ATTEMPTS).connect()
    raw.send(b"PUT q 0 1 KEY k\r\nx")
    assert raw.line() == b"200 OK KEY k"
    raw.send(b"JOB k\r\n")
    plain = json.loads(raw.exact(int(raw.line().split()[2])))
    assert "errors" not in plain
    raw.send(b"JOB k ERRORS\r\n")
    asked = json.loads(raw.exact(int(raw.line().split()[2])))
    assert asked["errors"] == [] and {k: v for k, v in asked.items() if k != "errors"} == plain
    assert raw.request(b"JOB k SOMETHING").startswith(b"400 Bad Request")


def test_the_history_goes_through_a_snapshot_clone_a_replica_and_a_dead_jobs_retry(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never", config=MANY_ATTEMPTS.replace("9", "3"))
    with _client(primary) as client:
        client.put("q", b"x", key="d")
        _fail_times(client, "d", 3)  # dead at its third
        dead = client.job("d", errors=True)
        assert dead is not None and dead.state == "dead" and _attempts(dead) == [1, 2, 3]
        replica = start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{primary.port}",
                                     "--server-id", "2", "--promote-after", "60",
                                     config=MANY_ATTEMPTS.replace("9", "3"))
        with _client(replica) as follower:
            poll_until(lambda: follower.job("d") is not None, timeout_s=DEADLINE_S)
            assert follower.job("d", errors=True) == dead  # from the snapshot
            assert client.retry("q", "d") == [True]
            poll_until(lambda: (i := follower.job("d")) is not None and i.state == "ready", timeout_s=DEADLINE_S)
            revived = follower.job("d", errors=True)
            assert revived is not None and revived.attempts == 0 and _attempts(revived) == [1, 2, 3]
            [job] = client.get("q", keys=True)
            client.fail(job.id, "after the retry")
            poll_until(lambda: _attempts(follower.job("d", errors=True)) == [1, 2, 3, 1],  # the stream
                       timeout_s=DEADLINE_S)
        raw = primary.connect()
        raw.send(b"SNAPSHOT\r\n")
        blob = raw.exact(int(raw.line().split()[2]))
    target = start_queue_server("--fsync", "never")
    raw = target.connect()
    raw.send(b"CLONE %d\r\n" % len(blob) + blob)
    assert raw.line() == b"200 OK"
    with _client(target) as clone:
        cloned = clone.job("d", errors=True)
        assert cloned is not None and _attempts(cloned) == [1, 2, 3, 1]
        assert cloned.errors is not None and cloned.errors[-1].error == "after the retry"


def test_a_version_2_snapshot_with_a_last_error_still_loads(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    body = (b"SYNC IDS 5 1 1\r\n"
            b"SYNC PUT q 0 5 KEY k ATTEMPTS 2 ERROR 4 AT 1700000000.5\r\nxboom"
            b"SYNC DEAD q 0 5 KEY d ATTEMPTS 3 DIED 1700000001.0 ERROR 4\r\nyoops")
    blob = b"SLOTMAP-SNAPSHOT 2\r\n" + body + b"END 3 %08x\r\n" % zlib.crc32(body)
    raw = start_queue_server("--fsync", "never").connect()
    raw.send(b"CLONE %d\r\n" % len(blob) + blob)
    assert raw.line() == b"200 OK"
    raw.send(b"JOB k ERRORS\r\n")
    ready = json.loads(raw.exact(int(raw.line().split()[2])))
    assert ready["errors"] == [{"at": 1700000000.5, "attempt": 2, "error": "boom"}]
    assert (ready["error"], ready["failed_at"]) == ("boom", 1700000000.5)
    raw.send(b"JOB d ERRORS\r\n")
    dead = json.loads(raw.exact(int(raw.line().split()[2])))
    assert [e["error"] for e in dead["errors"]] == ["oops"] and dead["state"] == "dead"
