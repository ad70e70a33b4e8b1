"""Job keys, attempts, FAIL, managed leases, TOUCH, SOLO, dead jobs, RETRY/DELETE, JOB/JOBS
on a real server (PROTOCOL.md Part B), through the client library and raw bytes."""
from __future__ import annotations

import itertools
import json
import time

import pytest
from polling import DEADLINE_S
from util import poll_until

from queue_server.client import QueueClient
from queue_server.protocol.client_errors import QueueServerError

FAST = """
[queues.q]
max_attempts = 3
retry_base_s = 0.2
retry_max_s = 0.4
"""
TOUCHED_LOCK_S = 1.5


def _client(server) -> QueueClient:  # type: ignore[no-untyped-def]
    return QueueClient(f"127.0.0.1:{server.port}")


def test_put_returns_a_server_key_that_survives_hand_outs_and_later(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    with _client(reused_queue_server("--fsync", "never")) as client:
        key = client.put("q", b"x")
        assert key.startswith("_") and key[1:].isdigit()
        [first] = client.get("q", keys=True)
        assert (first.key, first.attempt) == (key, 1)
        assert client.later(first.id) == [True]
        [second] = client.get("q", keys=True)
        assert (second.key, second.attempt) == (key, 1)  # LATER took the hand-out back
        assert second.id != first.id


def test_a_plain_get_sees_the_sockpqd_header_byte_for_byte(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    raw = reused_queue_server("--fsync", "never").connect()
    raw.send(b"PUT q 3 2 KEY *\r\nab")
    assert raw.line() == b"200 OK KEY _1"
    raw.send(b"PUT q 3 2\r\ncd")
    assert raw.line() == b"200 OK"
    raw.send(b"GET q\r\n")
    assert raw.line() == b"200 OK q 1 3 2"
    assert raw.exact(2) == b"ab"
    raw.send(b"GET q KEYS\r\n")
    assert raw.line() == b"200 OK q 2 3 2 KEY _2 ATTEMPT 1"  # the plain PUT got a key too
    assert raw.exact(2) == b"cd"


def test_key_replies_with_new_item_and_wait(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    raw = reused_queue_server("--fsync", "never").connect()
    raw.send(b"PUT q 0 1 NEW KEY mine\r\nx")
    assert raw.line() == b"200 OK IS _1 KEY mine"
    raw.send(b"PUT q 0 1 NEW WAIT out KEY *\r\ny")
    assert raw.line() == b"206 Wait for output IS _2 KEY _1"


def test_a_producer_key_may_not_start_with_an_underscore(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    raw = reused_queue_server("--fsync", "never").connect()
    raw.send(b"PUT q 0 1 KEY _7\r\nz")
    assert raw.line() == b"400 Bad Request: a producer's key may not start with _"
    raw.send(b"PUT q 0 1 KEY a/b\r\nz")
    assert raw.line() == b"400 Bad Request: bad job key"
    assert raw.request(b"PING") == b"200 PONG"  # both blocks were consumed


def test_unique_put_creates_no_second_job_while_the_key_is_live(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    with _client(reused_queue_server("--fsync", "never")) as client:
        assert client.put_job("q", b"one", key="order-1").created
        again = client.put_job("q", b"two", key="order-1")
        assert (again.key, again.existing_state) == ("order-1", "ready")
        [job] = client.get("q", keys=True)
        assert client.put_job("q", b"three", key="order-1").existing_state == "running"
        assert client.fail(job.id, "boom", delay_s=60).dead is False
        assert client.put_job("q", b"four", key="order-1").existing_state == "failed"
        assert client.total("q").jobs == 1
        info = client.job("order-1")
        assert info is not None and info.data == "one" and info.state == "failed"


def test_a_key_taken_in_another_queue_is_answered_with_that_queue(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = reused_queue_server("--fsync", "never")
    raw = server.connect()
    raw.send(b"PUT invoices 0 3 KEY order-9\r\none")
    assert raw.line() == b"200 OK KEY order-9"
    raw.send(b"PUT refunds 0 3 KEY order-9\r\ntwo")
    assert raw.line() == b"200 OK KEY order-9 EXISTS ready QUEUE invoices"
    raw.send(b"PUT invoices 0 5 KEY order-9\r\nthree")
    assert raw.line() == b"200 OK KEY order-9 EXISTS ready"  # in its own queue: as before, byte for byte
    raw.send(b"PUT refunds 0 4 NEW KEY order-9\r\nfour")
    assert raw.line() == b"200 OK KEY order-9 EXISTS ready QUEUE invoices"
    with _client(server) as client:
        again = client.put_job("refunds", b"five", key="order-9")
        assert (again.existing_state, again.existing_queue) == ("ready", "invoices")
        assert client.put_job("invoices", b"six", key="order-9").existing_queue is None
        [job] = client.get("invoices", keys=True)
        assert client.put_job("refunds", b"seven", key="order-9").existing_queue == "invoices"
        assert client.fail(job.id, "boom", delay_s=60).dead is False
        failed = client.put_job("refunds", b"eight", key="order-9")
        assert (failed.existing_state, failed.existing_queue) == ("failed", "invoices")
        assert client.total("refunds").jobs == 0


def test_fail_retries_with_backoff_then_the_job_is_dead_at_max_attempts(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = reused_queue_server("--fsync", "never", config=FAST)
    with _client(server) as client:
        key = client.put("q", b"poison")
        for attempt in (1, 2):
            [job] = poll_until(lambda: client.get("q", keys=True), timeout_s=DEADLINE_S)
            assert (job.key, job.attempt) == (key, attempt)
            # Counted from before the FAIL: from its reply, a test held back 0.1 s would fail.
            sent_at = time.time()
            result = client.fail(job.id, f"ValueError: try {attempt}")
            assert not result.dead and result.next_run_at is not None
            assert result.next_run_at >= sent_at + 0.1  # backoff, not at once
            info = client.job(key)
            assert info is not None and info.state == "failed" and info.error == f"ValueError: try {attempt}"
        [job] = poll_until(lambda: client.get("q", keys=True), timeout_s=DEADLINE_S)
        assert job.attempt == 3
        assert client.fail(job.id, "ValueError: last").dead
        info = client.job(key)
        assert info is not None
        assert (info.state, info.attempts, info.error, info.data) == ("dead", 3, "ValueError: last", "poison")
        assert info.died_at is not None
        assert client.total("q") == client.total("nothing")  # TOTAL does not count dead jobs
        assert client.get("q") == []
        stats = client.stats("q")["q"]
        assert stats.put == 1
        raw = server.connect()
        raw.send(b"STATS q\r\n")
        head = raw.line()
        entry = json.loads(raw.exact(int(head.split()[2])))["q"]
        assert (entry["dead"], entry["failed_total"], entry["dead_total"], entry["failed"]) == (1, 3, 1, 0)


def test_fail_with_delay_retries_past_the_queues_max_attempts(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    """DELAY says the client applied its own policy (a handler's max_attempts above the
    queue's): the server retries the job whatever its count."""
    server = reused_queue_server("--fsync", "never", config=FAST)
    with _client(server) as client:
        key = client.put("q", b"stubborn")
        for attempt in (1, 2, 3, 4):
            [job] = poll_until(lambda: client.get("q", keys=True), timeout_s=DEADLINE_S)
            assert (job.key, job.attempt) == (key, attempt)
            result = client.fail(job.id, f"try {attempt}", delay_s=0)
            assert not result.dead
        [job] = poll_until(lambda: client.get("q", keys=True), timeout_s=DEADLINE_S)
        assert client.fail(job.id, "the handler's own limit", dead=True).dead


def test_fail_dead_and_a_long_error_is_capped(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    with _client(reused_queue_server("--fsync", "never")) as client:
        key = client.put("q", b"x")
        [job] = client.get("q")
        assert client.fail(job.id, "E" * 40_000, dead=True).dead
        info = client.job(key)
        assert info is not None and info.error is not None and info.state == "dead"
        assert info.error.startswith("E" * 16384) and "cut" in info.error and len(info.error) < 16500
        with pytest.raises(QueueServerError, match="Job Not Found"):
            client.fail(job.id, "again")  # not running any more


def test_fail_of_an_unknown_id_is_not_found_and_the_block_is_consumed(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    raw = reused_queue_server("--fsync", "never").connect()
    raw.send(b"FAIL 99 5\r\nerror")
    assert raw.line() == b"404 Job Not Found"
    raw.send(b"FAIL x 5\r\nerror")
    assert raw.line().startswith(b"400 Bad Request")
    raw.send(b"PING\r\n")
    assert raw.line() == b"200 PONG"


def test_a_managed_lease_that_expires_counts_as_a_failed_attempt(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = reused_queue_server("--fsync", "never", config=FAST)
    with _client(server) as client:
        key = client.put("q", b"slow")
        [_job] = client.get("q", expire_s=0.2, keys=True)
        info = poll_until(lambda: (i := client.job(key)) is not None and i.state != "running" and i, timeout_s=DEADLINE_S)
        assert info.error == "lock expired after 0.2 s"
        assert info.state in ("failed", "ready")
        [again] = poll_until(lambda: client.get("q", keys=True), timeout_s=DEADLINE_S)
        assert again.attempt == 2
        # without KEYS, expiry is sockPQd's LATER: no failure recorded, the hand-out taken back
        assert client.later(again.id) == [True]
        [plain] = client.get("q", expire_s=0.1)
        poll_until(lambda: client.total("q").running == 0, timeout_s=DEADLINE_S)
        [after] = poll_until(lambda: client.get("q", keys=True), timeout_s=DEADLINE_S)
        assert after.attempt == 2 and after.id != plain.id


def touched_throughout(client: QueueClient, queue: str) -> bool:
    """A job of `queue` locked for TOUCHED_LOCK_S and touched every 0.15 s for twice that:
    True when it stayed running; False when a request that found it gone came too late to
    tell (TOUCHED_LOCK_S * 0.9 after the touch before it was sent: a busy machine held the
    test or the server back, and the lock may rightly have lapsed); AssertionError when a
    request in time found it gone."""
    client.put(queue, b"long")
    renewed_at = started = time.monotonic()  # the lock starts after this

    def in_time(found: bool) -> bool:
        if not found:
            assert time.monotonic() - renewed_at >= TOUCHED_LOCK_S * 0.9, "the lock lapsed while touched"
        return found

    [job] = client.get(queue, expire_s=TOUCHED_LOCK_S, keys=True)
    while time.monotonic() - started < 2 * TOUCHED_LOCK_S:
        sent_at = time.monotonic()
        if not in_time(client.touch(job.id) == [True]):
            return False
        renewed_at = sent_at
        time.sleep(0.15)  # the renewal rhythm under test, not a wait for a state
    if not in_time(client.total(queue).running == 1):
        return False
    assert client.touch(job.id, 10**6, expire_s=30) == [True, False]
    assert client.done(job.id)[0].found
    return True


def test_touch_keeps_a_running_job_from_expiring(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    # A 1.5 s lock renewed every 0.15 s: a 0.6 s lock lapsed when the test was descheduled on
    # a busy machine, which says nothing about TOUCH; a longer stall still can, so such a
    # round is played again on another queue.
    with _client(reused_queue_server("--fsync", "never")) as client:
        queues = (f"q{n}" for n in itertools.count())
        poll_until(lambda: touched_throughout(client, next(queues)), timeout_s=DEADLINE_S,
                   what="a round of touches never 1.35 s apart")


def test_a_solo_job_is_handed_out_alone(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    with _client(reused_queue_server("--fsync", "never")) as client:
        client.put("q", b"poison", priority=5)
        [job] = client.get("q")
        client.fail(job.id, "killed its slot", delay_s=0, solo=True)
        for data in (b"a", b"b", b"c"):
            client.put("q", data)
        batch = poll_until(lambda: client.get("q", count=10, keys=True), timeout_s=DEADLINE_S)
        assert [j.data for j in batch] == [b"poison"]  # alone, its batch-mates not with it
        assert client.fail(batch[0].id, "again", delay_s=0, solo=True).dead is False
        client.put("q", b"d", priority=9)
        # priority order is d (9), poison (5), a b c (0): the batch stops before the solo job
        assert [j.data for j in client.get("q", count=10)] == [b"d"]
        assert [j.data for j in client.get("q", count=10)] == [b"poison"]
        assert [j.data for j in client.get("q", count=10)] == [b"a", b"b", b"c"]


def test_later_solo_takes_the_hand_out_back_and_each_job_runs_alone_after_a_restart_too(
        start_queue_server) -> None:  # type: ignore[no-untyped-def]
    """Issue 15: how a master gives back a crashed batch's undecided jobs."""
    server = start_queue_server("--fsync", "always")
    with _client(server) as client:
        for data in (b"a", b"b", b"c"):
            client.put("q", data)
        batch = client.get("q", count=10, keys=True)
        assert client.later(*(job.id for job in batch[1:]), solo=True) == [True, True]
        client.done(batch[0].id)
        client.put("q", b"d")
    server.kill()
    restarted = start_queue_server("--fsync", "always", data_dir=server.data_dir)  # replayed from the log
    with _client(restarted) as client:
        runs = [client.get("q", count=10, keys=True) for _ in range(3)]
        # Alone, each on its first attempt again (the LATER took the hand-out back), in order.
        assert [[(j.data, j.attempt) for j in run] for run in runs] == [
            [(b"b", 1)], [(b"c", 1)], [(b"d", 1)]]
    raw = restarted.connect()
    raw.send(b"PUT q 0 1\r\nx")
    assert raw.line() == b"200 OK"
    raw.send(b"GET q\r\n")
    job_id = raw.line().split()[3]
    raw.exact(1)
    raw.send(b"LATER " + job_id + b" DELAY 5 SOLO\r\n")
    assert raw.line() == b"200 OK"
    raw.send(b"LATER 999999 SOLO\r\n")
    assert raw.line() == b"404 Job Not Found"


def test_retry_and_delete_one_list_and_all(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    with _client(reused_queue_server("--fsync", "never")) as client:
        keys = [client.put("q", b"job%d" % n, key=f"k{n}") for n in range(4)]
        for _ in range(4):
            [job] = client.get("q")
            client.fail(job.id, "bad", dead=True)
        assert [i.key for i in client.jobs("q", "dead")] == ["k3", "k2", "k1", "k0"]  # newest first
        assert [i.key for i in client.jobs("q", "dead", limit=2, after="k3")] == ["k2", "k1"]
        assert client.retry("q", "k0", "nope") == [True, False]
        [back] = client.get("q", keys=True)
        assert (back.key, back.attempt) == ("k0", 1)  # attempts reset
        assert client.delete("q", "k1", "k0", "zzz") == ["ok", "running", "not_found"]
        assert client.retry_all("q") == 2
        assert client.delete_all_dead("q") == 0
        assert sorted(i.key for i in client.jobs("q", "ready")) == ["k2", "k3"]
        assert client.delete("q", "k2") == ["ok"]
        assert client.total("q").jobs == 1 and keys == ["k0", "k1", "k2", "k3"]
        [job] = client.get("q")
        client.fail(job.id, "later", delay_s=3600)
        assert client.retry_all("q", "failed") == 1
        assert client.get("q")[0].data == b"job3"


def test_dead_jobs_are_bounded_oldest_dropped_and_counted(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = start_queue_server("--fsync", "never", config="[queues.q]\ndead_max = 2\n")
    with _client(server) as client:
        for n in range(4):
            client.put("q", b"%d" % n, key=f"d{n}")
            [job] = client.get("q")
            client.fail(job.id, "x", dead=True)
        assert [i.key for i in client.jobs("q", "dead")] == ["d3", "d2"]
        assert client.job("d0") is None
    poll_until(lambda: "dead job(s) dropped" in server.output_text(), timeout_s=DEADLINE_S)


def test_a_dead_job_past_its_age_is_dropped_though_nothing_else_happens(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    # 2 s: the job must still be there at the JOB right after the FAIL on a busy machine.
    server = start_queue_server("--fsync", "never", config="[queues.q]\ndead_max_age_s = 2.0\n")
    with _client(server) as client:
        client.put("q", b"old", key="old")
        [job] = client.get("q")
        client.fail(job.id, "x", dead=True)
        assert client.job("old") is not None
        # No delayed job, lock or TTL comes due: only the housekeeping looks at the age.
        poll_until(lambda: client.job("old") is None, timeout_s=DEADLINE_S)
        assert client.stats("q")["q"].dead == 0
    poll_until(lambda: "older than dead_max_age_s" in server.output_text(), timeout_s=DEADLINE_S)


def test_keys_attempts_errors_and_dead_jobs_survive_kill_9_and_a_snapshot(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = start_queue_server("--fsync", "always")
    with _client(server) as client:
        client.put("q", b"ready one", key="r1")
        client.put("q", b"failing", key="f1")
        client.put("q", b"dying", key="x1")
        client.put("q", b"running", key="run1")
        jobs = {j.data: j for j in client.get("q", count=4, keys=True)}
        client.later(jobs[b"ready one"].id)
        client.fail(jobs[b"failing"].id, "Traceback: f1", delay_s=3600)
        client.fail(jobs[b"dying"].id, "Traceback: x1", dead=True)
        before = {key: client.job(key) for key in ("r1", "f1", "x1", "run1")}
        server_key = client.put("q", b"server keyed")
    server.kill()
    restarted = start_queue_server("--fsync", "always", data_dir=server.data_dir)
    with _client(restarted) as client:
        after = {key: client.job(key) for key in ("r1", "f1", "x1", "run1")}
        for key in ("r1", "f1", "x1"):
            assert after[key] is not None and before[key] is not None
            assert (after[key].state, after[key].attempts, after[key].error) == \
                (before[key].state, before[key].attempts, before[key].error)
        assert after["run1"] is not None and after["run1"].state == "ready"  # at least once
        assert after["run1"].attempts == 0  # the crash took its hand-out back
        assert client.job(server_key) is not None
        assert client.put("q", b"next") not in (server_key, "_1")  # the key counter came back


def test_clone_and_a_replica_carry_keys_attempts_errors_and_dead_jobs(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    with _client(primary) as client:
        client.put("q", b"a", key="a1")
        [job] = client.get("q")
        client.fail(job.id, "boom a1", dead=True)
        client.put("q", b"b", key="b1")
        replica = start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{primary.port}",
                                     "--server-id", "2", "--promote-after", "60")
        with _client(replica) as follower:
            poll_until(lambda: follower.job("b1") is not None, timeout_s=DEADLINE_S)
            [job] = client.get("q", keys=True)
            client.fail(job.id, "boom b1", delay_s=3600)
            poll_until(lambda: (i := follower.job("b1")) is not None and i.state == "failed", timeout_s=DEADLINE_S)
            dead = follower.job("a1")
            assert dead is not None and (dead.state, dead.error, dead.attempts) == ("dead", "boom a1", 1)
            failed = follower.job("b1")
            assert failed is not None and (failed.error, failed.attempts) == ("boom b1", 1)
        raw = primary.connect()
        raw.send(b"SNAPSHOT\r\n")
        blob = raw.exact(int(raw.line().split()[2]))
    assert blob.startswith(b"SLOTMAP-SNAPSHOT 4\r\n")
    target = start_queue_server("--fsync", "never")
    raw = target.connect()
    raw.send(b"CLONE %d\r\n" % len(blob) + blob)
    assert raw.line() == b"200 OK"
    with _client(target) as clone:
        dead = clone.job("a1")
        assert dead is not None and (dead.state, dead.error) == ("dead", "boom a1")
        failed = clone.job("b1")
        assert failed is not None and (failed.state, failed.error) == ("failed", "boom b1")


def test_job_and_jobs_answer_offline_and_bad_requests_get_400(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    raw = reused_queue_server("--fsync", "never").connect()
    raw.send(b"PUT q 0 3 KEY k\r\nabc")
    assert raw.line() == b"200 OK KEY k"
    assert raw.request(b"OFFLINE") == b"200 OK Switched to Offline Mode"
    raw.send(b"JOB k\r\n")
    head = raw.line()
    body = json.loads(raw.exact(int(head.split()[2])))
    assert (body["key"], body["state"], body["data"], body["attempts"]) == ("k", "ready", "abc", 0)
    assert raw.request(b"RETRY q k") == b"500 Offline Mode"
    assert raw.request(b"DELETE q ALL DEAD") == b"500 Offline Mode"
    assert raw.request(b"TOUCH 1") == b"500 Offline Mode"
    assert raw.request(b"JOB nope") == b"404 Job Not Found"
    assert raw.request(b"JOBS q sleeping").startswith(b"400 Bad Request")
    assert raw.request(b"JOBS q dead LIMIT 0").startswith(b"400 Bad Request")
    assert raw.request(b"RETRY q ALL READY").startswith(b"400 Bad Request")
    assert raw.request(b"JOB bad/key").startswith(b"400 Bad Request")
