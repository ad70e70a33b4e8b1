"""PUT ... TTL <sec> (issue 12): a job not handed out within TTL seconds of becoming ready
is deleted (STATS ttl_expired, SYNC TTL record), a job handed out before keeps running and
no TTL applies to it again; the rule survives a restart and a replica follows it. Real
server processes."""
from __future__ import annotations

import time

from polling import DEADLINE_S
from util import poll_until

from queue_server.client import QueueClient

TTL_S = 2.0


def _client(server) -> QueueClient:  # type: ignore[no-untyped-def]
    return QueueClient(f"127.0.0.1:{server.port}")


def _ttl_expired(client: QueueClient, queue: str) -> int:
    return client.stats(queue)[queue].ttl_expired


def test_a_job_not_taken_within_its_ttl_is_deleted_and_one_taken_is_not(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = reused_queue_server("--fsync", "never")
    raw = server.connect()
    # 2 s TTLs: both jobs must still be there at JOBS and the GET below, which a busy shared
    # machine can delay past half a second.
    raw.send(b"PUT q 0 4 TTL %g KEY late\r\nlate" % TTL_S)
    assert raw.line() == b"200 OK KEY late"
    with _client(server) as client:
        put_at = time.time()
        taken_key = client.put("q", b"taken", key="taken", ttl_s=TTL_S, priority=1)
        plain_key = client.put("q", b"plain")
        # JOB and JOBS say when a TTL job goes, and that a plain one never does.
        info = client.job(taken_key)
        assert info is not None and info.expires_at is not None
        assert put_at < info.expires_at <= time.time() + TTL_S
        taken_expires_at = info.expires_at
        assert [j.expires_at is None for j in client.jobs("q", "ready")] == [False, False, True]
        [taken] = client.get("q", keys=True)  # the higher priority: handed out in time
        assert taken.key == taken_key
        poll_until(lambda: client.job("late") is None, timeout_s=DEADLINE_S, what="the TTL deleting the job")
        assert _ttl_expired(client, "q") == 1
        assert client.total("q").jobs == 1  # the plain job stays
        assert client.job(plain_key) is not None
        # The TTL held until the first hand-out only: a LATER puts it back for good.
        assert client.later(taken.id) == [True]
        poll_until(lambda: time.time() > taken_expires_at + 0.5, timeout_s=DEADLINE_S,
                   what="past its old deadline")  # the passing time is the subject: it must stay
        info = client.job(taken_key)
        assert info is not None and info.state == "ready"
        assert _ttl_expired(client, "q") == 1
        # A key freed by a TTL can be used again, and the new job is not skipped.
        assert client.put("q", b"again", key="late", priority=5) == "late"
        [again] = client.get("q")
        assert again.data == b"again"


def test_a_delayed_ttl_job_counts_from_becoming_ready(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = reused_queue_server("--fsync", "never")
    with _client(server) as client:
        client.put("q", b"d", key="d", delay_s=1.0, ttl_s=1.5)
        poll_until(lambda: (i := client.job("d")) is not None and i.state == "ready", timeout_s=DEADLINE_S)
        poll_until(lambda: client.job("d") is None, timeout_s=DEADLINE_S, what="the TTL deleting the job")
        assert _ttl_expired(client, "q") == 1


def test_ttl_jobs_behind_others_are_deleted_without_being_handed_out(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = reused_queue_server("--fsync", "never")
    with _client(server) as client:
        client.put("q", b"first, no ttl", key="first")
        client.put("q", b"long", key="long", ttl_s=3600)
        client.put("q", b"short", key="short", ttl_s=0.3)  # behind two others: skipped later
        client.put("q", b"last", key="last")
        poll_until(lambda: client.job("short") is None, timeout_s=DEADLINE_S)
        assert [job.key for job in client.jobs("q", "ready")] == ["first", "long", "last"]
        assert [job.data for job in client.get("q", count=10)] == [b"first, no ttl", b"long", b"last"]
        assert client.total("q").jobs == 0


def test_the_ttl_survives_a_restart_and_an_expired_one_is_dropped_on_recovery(start_queue_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data_dir = tmp_path / "ttl-data"
    server = start_queue_server("--fsync", "always", data_dir=data_dir)
    with _client(server) as client:
        put_at = time.time()
        client.put("q", b"soon", key="soon", ttl_s=TTL_S)
        client.put("q", b"later", key="later", ttl_s=3600)
        client.put("q", b"kept", key="kept")
        client.put("q", b"run", key="run", ttl_s=TTL_S)
        [run] = client.get("q", keys=True)
        assert run.key == "soon"  # FIFO: the first put is handed out
    server.kill()
    # The server stays down past the TTL of the jobs it held (the passing time is the subject).
    poll_until(lambda: time.time() > put_at + TTL_S + 0.5, timeout_s=DEADLINE_S, what="the TTL passed")
    server = start_queue_server("--fsync", "always", data_dir=data_dir)
    with _client(server) as client:
        # "soon" was handed out before the crash (released again at recovery: no TTL);
        # "run" was never handed out and its TTL passed while the server was down.
        assert client.job("run") is None
        assert {key: client.job(key) is not None for key in ("soon", "later", "kept")} == \
            {"soon": True, "later": True, "kept": True}
        assert _ttl_expired(client, "q") == 1
        # A live TTL is kept across a clean restart too (log, then the snapshot made at start).
        before = time.time()
        client.put("q", b"snap", key="snap", ttl_s=60)
        after = time.time()
    raw = server.connect()
    assert raw.request(b"SHUTDOWN") == b"221 Shutting Down"
    server = start_queue_server("--fsync", "always", data_dir=data_dir)
    with _client(server) as client:
        assert client.job("snap") is not None
    raw = server.connect()
    raw.send(b"SNAPSHOT\r\n")
    blob = raw.exact(int(raw.line().split()[2]))
    [record] = [line for line in blob.split(b"\r\n") if b" KEY snap " in line]
    deadline = float(record.split(b" TTL ")[1].split()[0])
    assert before + 60 <= deadline <= after + 60  # the PUT's deadline, not one made at start


def test_a_replica_deletes_a_ttl_job_when_the_primary_does(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    replica = start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{primary.port}",
                                 "--server-id", "2", "--promote-after", "60")
    with _client(primary) as client, _client(replica) as follower:
        client.put("q", b"x", key="x", ttl_s=0.5)
        poll_until(lambda: client.job("x") is None, timeout_s=DEADLINE_S)
        poll_until(lambda: follower.job("x") is None, timeout_s=DEADLINE_S)
        assert _ttl_expired(follower, "q") == 1
