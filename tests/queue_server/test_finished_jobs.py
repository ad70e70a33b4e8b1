"""Finished jobs kept and their results on a real server (issue 26 points 2 and 3):
keep_done_max, keep_done_s and keep_done_total_max bound them; a kill -9 and a restart keep
them (log and snapshot); RESULT waits in the server and is woken by DONE, a death or a
DELETE, or answers when its TIMEOUT runs out."""
from __future__ import annotations

import json
import time
from typing import Any

import pytest
from polling import DEADLINE_S
from util import poll_until

from queue_server.client import QueueClient
from tests.queue_server.client.test_jobs_cli import slotmap

CONFIG = """
[queue_server]
keep_done_total_max = 6
[queues.few]
keep_done_max = 3
[queues.brief]
keep_done_s = 0.5
[queues.small]
max_result_bytes = 4
max_attempts = 1
"""


def _done(client: QueueClient, queue: str, key: str, result: bytes | None = None) -> None:
    client.put(queue, b"data of " + key.encode(), key=key)
    [job] = client.get(queue, keys=True)
    if result is None:
        assert client.done(job.id)[0].found
    else:
        assert client.done_with_result(job.id, result).found


def _json(raw: Any, request: bytes) -> Any:
    raw.send(request)
    head = raw.line()
    assert head.startswith(b"200 OK "), head
    return json.loads(raw.exact(int(head.split()[2])))


def test_finished_jobs_are_kept_within_their_bounds_and_survive_a_kill(start_queue_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data_dir = tmp_path / "kept"
    server = start_queue_server(config=CONFIG, data_dir=data_dir)
    with QueueClient(f"127.0.0.1:{server.port}", name="worker.a") as client:
        for n in range(5):
            _done(client, "few", f"f{n}", b"result %d" % n)
        assert [info.key for info in client.jobs("few", "done")] == ["f4", "f3", "f2"]  # keep_done_max
        assert client.job("f1") is None
        f4 = client.job("f4")
        assert f4 is not None and (f4.state, f4.result, f4.ran_by, f4.attempts) == ("done", "result 4", "worker.a", 1)
        _done(client, "small", "s1", b"too long")  # over max_result_bytes: said, not kept
        s1 = client.job("s1")
        assert s1 is not None and (s1.result, s1.result_len, s1.result_kept) == (None, 8, False)
        _done(client, "brief", "b1")
        poll_until(lambda: client.job("b1") is None, timeout_s=DEADLINE_S, what="b1 gone after keep_done_s")
        # Over keep_done_total_max (6), each DONE drops the oldest of its own queue.
        for n in range(4):
            _done(client, "other", f"o{n}")
        kept = {info.key for queue in ("few", "small", "other") for info in client.jobs(queue, "done")}
        assert len(kept) <= 6 and {"o3", "s1", "f4"} <= kept
        # A unique PUT of a finished job's key makes a new job; JOB shows the live one.
        client.put("few", b"again", key="f4")
        assert client.job("f4").state == "ready"  # type: ignore[union-attr]
        expected = {queue: [info.model_dump() for info in client.jobs(queue, "done")]
                    for queue in ("few", "small", "other")}
    server.kill()  # kill -9: the log has every record
    again = start_queue_server(config=CONFIG, data_dir=data_dir)
    with QueueClient(f"127.0.0.1:{again.port}") as client:
        assert {queue: [info.model_dump() for info in client.jobs(queue, "done")]
                for queue in ("few", "small", "other")} == expected
        raw = again.connect()
        raw.send(b"SNAPSHOT\r\n")
        head = raw.line()
        snapshot = raw.exact(int(head.split()[2]))
        assert snapshot.startswith(b"SLOTMAP-SNAPSHOT 4\r\n") and b"SYNC KEPT few 0 " in snapshot
    # From the snapshot this time: a new server cloned from it shows the same finished jobs.
    clone = start_queue_server()
    raw = clone.connect()
    raw.send(b"CLONE %d\r\n" % len(snapshot) + snapshot)
    assert raw.line() == b"200 OK"
    assert _json(raw, b"JOB f3\r\n")["result"] == "result 3"
    assert [job["key"] for job in _json(raw, b"JOBS few done\r\n")] == [j["key"] for j in expected["few"]]


def test_result_waits_in_the_server_until_the_job_ends(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = start_queue_server("--fsync", "never", config=CONFIG)
    producer = server.connect()
    producer.send(b"PUT small 0 1 KEY w1\r\nx")
    assert producer.line() == b"200 OK KEY w1"
    waiter = server.connect()
    waiter.send(b"RESULT small w1 TIMEOUT 60\r\n")
    worker = server.connect()
    worker.send(b"GET small KEYS\r\n")
    job_id = int(worker.line().split()[3])
    worker.exact(1)
    started = time.monotonic()
    worker.send(b"DONE %d RESULT 2\r\nok" % job_id)
    assert worker.line() == b"200 OK FINQ"
    head = waiter.line()  # answered by the DONE, not by the 60 s timeout
    finished = json.loads(waiter.exact(int(head.split()[2])))
    assert time.monotonic() - started < 30.0
    assert (finished["state"], finished["result"], finished["runtime_s"] >= 0) == ("done", "ok", True)
    # A death answers too (state dead), and so does a DELETE (404), and a timeout (as it is).
    for key in (b"w2", b"w3", b"w4"):
        producer.send(b"PUT small 0 1 KEY %s\r\nx" % key)
        assert producer.line() == b"200 OK KEY " + key
    waiter.send(b"RESULT small w2 TIMEOUT 60\r\n")
    worker.send(b"GET small KEYS\r\n")
    job_id = int(worker.line().split()[3])
    worker.exact(1)
    worker.send(b"FAIL %d 4\r\nboom" % job_id)  # max_attempts 1: dead
    assert worker.line() == b"200 OK DEAD"
    dead = json.loads(waiter.exact(int(waiter.line().split()[2])))
    assert (dead["state"], dead["error"]) == ("dead", "boom")
    waiter.send(b"RESULT small w3 TIMEOUT 60\r\n")
    producer.send(b"DELETE small w3\r\n")
    assert producer.line() == b"200 OK"
    assert waiter.line() == b"404 Job Not Found"
    waiter.send(b"RESULT small w4 TIMEOUT 0.3\r\nPING\r\n")
    waiting = json.loads(waiter.exact(int(waiter.line().split()[2])))
    assert waiting["state"] == "ready" and waiter.line() == b"200 PONG"  # held, then in order
    waiter.send(b"RESULT other w4\r\n")  # the key is not that queue's
    assert waiter.line() == b"404 Job Not Found"
    waiter.send(b"RESULT small w4 TIMEOUT 3601\r\n")
    assert waiter.line().startswith(b"400 Bad Request")


def test_a_replica_keeps_the_same_finished_jobs_and_drops_them_with_its_primary(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    config = "[queues.brief]\nkeep_done_s = 2.0\n"
    primary = start_queue_server("--fsync", "never", config=config)
    replica = start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{primary.port}",
                                 "--server-id", "2", "--promote-after", "60", config=config)
    with QueueClient(f"127.0.0.1:{primary.port}", name="worker.b") as client, \
            QueueClient(f"127.0.0.1:{replica.port}") as follower:
        _done(client, "brief", "r1", b"one")
        poll_until(lambda: follower.job("r1") is not None, timeout_s=DEADLINE_S, what="r1 on the replica")
        assert follower.job("r1") == client.job("r1")  # the same times, door and result (SYNC DONE AT/BY)
        # The primary's age sweep is recorded (SYNC PRUNE): the replica drops it with it.
        poll_until(lambda: client.job("r1") is None, timeout_s=DEADLINE_S, what="r1 dropped after keep_done_s")
        poll_until(lambda: follower.job("r1") is None, timeout_s=DEADLINE_S, what="r1 dropped on the replica")


def test_a_done_with_result_and_a_bad_id_still_reads_its_result_past(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    # Found by the recovery property test: the id was parsed before the length, so the
    # result's bytes were read as the next request (fine point 1 of PROTOCOL.md).
    server = start_queue_server("--fsync", "never")
    raw = server.connect()
    raw.send(b"DONE 1000000000000000000 RESULT 6\r\nPING\r\nPING\r\n")
    assert raw.line().startswith(b"400 Bad Request: job id must be")
    assert raw.line() == b"200 PONG"


def test_a_nan_timeout_is_refused_at_once_rather_than_asking_the_server_forever(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    # With NaN no deadline was ever reached and each turn asked again with no wait in the server.
    server = start_queue_server("--fsync", "never")
    address = f"127.0.0.1:{server.port}"
    with QueueClient(address) as client:
        client.put("small", b"x", key="n1")
        with pytest.raises(ValueError, match="nan"):
            client.result("small", "n1", timeout=float("nan"))
        assert client.job("n1").state == "ready"  # type: ignore[union-attr]
    shell = slotmap("result", "small", "n1", "--wait", "nan", "--server", address)
    assert shell.returncode == 2 and "nan" in shell.stderr, shell


def test_done_large_finishes_the_job_with_the_length_of_a_result_too_large_to_send(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = start_queue_server("--fsync", "never")
    raw = server.connect()
    raw.send(b"PUT small 0 1 KEY big1\r\nx")
    assert raw.line() == b"200 OK KEY big1"
    raw.send(b"GET small KEYS\r\n")
    job_id = int(raw.line().split()[3])
    raw.exact(1)
    raw.send(b"DONE %d LARGE 2097152\r\nPING\r\n" % job_id)  # no block: PING is the next request
    assert raw.line() == b"200 OK FINQ" and raw.line() == b"200 PONG"
    done = _json(raw, b"JOB big1\r\n")
    assert (done["state"], done["result"], done["result_len"], done["result_kept"]) == ("done", None, 2097152, False)
    raw.send(b"DONE %d LARGE many\r\nPING\r\n" % job_id)
    assert raw.line().startswith(b"400 Bad Request") and raw.line() == b"200 PONG"


def test_a_key_finished_again_and_again_counts_once_in_keep_done_max_and_stats(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    # A recurring producer key ("refresh-account-7") left one stale entry per finish that
    # counted toward keep_done_max (3 here): the other finished job was pushed out, and
    # STATS (the dashboard's Done count) said 3 kept beside a listing of 1.
    server = start_queue_server("--fsync", "never", config=CONFIG)
    with QueueClient(f"127.0.0.1:{server.port}") as client:
        _done(client, "few", "other", b"kept")
        for n in range(3):
            _done(client, "few", "again", b"run %d" % n)
        listed = [info.key for info in client.jobs("few", "done")]
        assert listed == ["again", "other"]
        assert client.stats("few")["few"].kept == len(listed)
        assert client.result("few", "other") == "kept" and client.result("few", "again") == "run 2"


def test_a_result_stays_readable_when_its_key_is_put_again_in_another_queue(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    # Keys are one namespace: once photo-42 finished in "few", a job of "small" may take the
    # key. RESULT few photo-42 answered 404 then, though JOBS few done listed it with its result.
    server = start_queue_server("--fsync", "never", config=CONFIG)
    with QueueClient(f"127.0.0.1:{server.port}") as client:
        _done(client, "few", "photo-42", b"thumb")
        client.put("small", b"next step", key="photo-42")
        assert client.result("few", "photo-42") == "thumb"
        assert client.job("photo-42").queue == "small"  # type: ignore[union-attr]
        waiting = client.finished("small", "photo-42")
        assert waiting is not None and waiting.state == "ready"
