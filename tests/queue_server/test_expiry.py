"""Expiry of running jobs (EXPIRE, THEN, -d, per-queue lock times) and delayed jobs (DELAY)."""
from __future__ import annotations

import time

import pytest
from polling import DEADLINE_S
from util import drain, get, get_job, poll_until, put_ok, runlist, stats, total


def _back_to(client, queue: str, expected: tuple[int, int, int, int], timeout_s: float = DEADLINE_S) -> None:
    poll_until(lambda: total(client, queue) == expected, timeout_s, what=f"TOTAL {queue} == {expected}")


def test_expired_job_goes_back_to_the_end_of_its_priority(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    put_ok(client, "q", 0, b"b")
    # 1 s, not less: the TOTAL right after must see the job still running on a busy machine.
    job = get_job(client, "GET q EXPIRE 1")
    assert job.data == b"a"
    assert total(client, "q") == (1, 1, 1, 1)
    _back_to(client, "q", (1, 1, 2, 0))
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"404 Job Not Found\r\n")
    assert [j.data for j in drain(client, "q")] == [b"b", b"a"]


def test_expire_then_done_deletes_the_job(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a", "IS it")
    job = get_job(client, "GET q EXPIRE 0.3 THEN DONE")
    _back_to(client, "q", (0, 0, 0, 0))
    client.send(b"LATER %d\r\n" % job.id)
    client.expect(b"404 Job Not Found\r\n")
    assert get(client, "GET q") is None


def test_expire_then_later_puts_the_job_back(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    get_job(client, "GET q EXPIRE 0.3 THEN LATER")
    _back_to(client, "q", (1, 1, 1, 0))


def test_expire_zero_brings_the_job_back_at_once(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a", "IS it")
    job = get_job(client, "GET q EXPIRE 0")
    # Without a lock time the job would never come back: no tight deadline needed to tell.
    _back_to(client, "q", (1, 1, 1, 0))
    again = get_job(client, "GET q")
    assert (again.data, again.item) == (b"a", "it") and again.id != job.id


def test_expire_zero_then_done_deletes_the_job_at_once(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    get_job(client, "GET q EXPIRE 0 THEN DONE")
    _back_to(client, "q", (0, 0, 0, 0))


def test_runlist_shows_the_expiry_as_a_unix_time(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    put_ok(client, "q", 0, b"b")
    before = time.time()
    timed = get_job(client, "GET q EXPIRE 100.5")
    untimed = get_job(client, "GET q")
    after = time.time()
    entries = {entry.id: entry for entry, _ in runlist(client)}
    assert entries[untimed.id].expire_at is None
    expire_at = entries[timed.id].expire_at
    assert expire_at is not None
    assert before + 100.5 - 1 <= expire_at <= after + 100.5 + 1, (before, expire_at)


def test_job_is_still_running_before_its_expiry(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    job = get_job(client, "GET q EXPIRE 30")
    assert total(client, "q") == (1, 0, 0, 1)
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK FINQ\r\n")


def test_server_started_with_d_deletes_expired_jobs_by_default(reused_queue_server):
    server = reused_queue_server("-d")
    client = server.connect()
    put_ok(client, "q", 0, b"a")
    get_job(client, "GET q EXPIRE 0.2")
    _back_to(client, "q", (0, 0, 0, 0))


def test_then_later_overrides_the_d_default(reused_queue_server):
    server = reused_queue_server("-d")
    client = server.connect()
    put_ok(client, "q", 0, b"a")
    get_job(client, "GET q EXPIRE 0.2 THEN LATER")
    _back_to(client, "q", (1, 1, 1, 0))


def test_config_expire_action_done_is_the_same_as_d(start_queue_server):
    server = start_queue_server(config='[queue_server]\nexpire_action = "done"\n')
    client = server.connect()
    put_ok(client, "q", 0, b"a")
    put_ok(client, "q", 0, b"b")
    get_job(client, "GET q EXPIRE 0.2")
    get_job(client, "GET q EXPIRE 0.2 THEN LATER")
    _back_to(client, "q", (1, 1, 1, 0))
    assert get_job(client, "GET q").data == b"b"


# 1 s: the RUNLIST right after the GET must see the job still running on a busy machine.
LOCK_CONFIG = "[queue_server]\nlock_timeouts_s = { slow = 1.0 }\n"


def test_queue_lock_timeout_from_config_expires_a_job_handed_out_without_expire(reused_queue_server):
    server = reused_queue_server(config=LOCK_CONFIG)
    client = server.connect()
    put_ok(client, "slow", 0, b"a")
    job = get_job(client, "GET slow")
    (entry, _), = runlist(client)
    assert entry.id == job.id and entry.expire_at is not None
    _back_to(client, "slow", (1, 1, 1, 0))


def test_queue_without_a_lock_timeout_keeps_jobs_running_without_expiry(reused_queue_server):
    server = reused_queue_server(config=LOCK_CONFIG)
    client = server.connect()
    put_ok(client, "other", 0, b"a")
    job = get_job(client, "GET other")
    (entry, _), = runlist(client)
    assert entry.id == job.id and entry.expire_at is None


def test_explicit_expire_overrides_the_queue_lock_timeout(reused_queue_server):
    server = reused_queue_server(config=LOCK_CONFIG)
    client = server.connect()
    put_ok(client, "slow", 0, b"a")
    before = time.time()
    get_job(client, "GET slow EXPIRE 1000")
    (entry, _), = runlist(client)
    assert entry.expire_at is not None and entry.expire_at >= before + 999


def test_later_with_delay_hides_the_job_until_the_delay_passes(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a", "IS it")
    job = get_job(client, "GET q")
    # 1.5 s: the GET, TOTAL and RUNLIST below must all come before it on a busy machine.
    client.send(b"LATER %d DELAY 1.5\r\n" % job.id)
    client.expect(b"200 OK\r\n")
    assert get(client, "GET q") is None
    assert total(client, "q") == (1, 1, 1, 0)
    assert runlist(client) == []
    again = poll_until(lambda: get(client, "GET q"), DEADLINE_S, what="delayed job ready again")
    assert (again.data, again.item) == (b"a", "it") and again.id != job.id


def test_put_with_delay_hides_the_job_until_its_activation_time(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 3, b"deferred", "DELAY 1.5")  # past the three requests below
    assert get(client, "GET q") is None
    assert get(client, "GET") is None
    assert total(client, "q") == (1, 1, 1, 0)
    job = poll_until(lambda: get(client, "GET q"), DEADLINE_S, what="delayed job activated")
    assert (job.priority, job.data) == (3, b"deferred")


def test_put_with_delay_zero_is_ready_at_once(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"now", "DELAY 0")
    job = poll_until(lambda: get(client, "GET q"), 1.0, what="DELAY 0 job ready")
    assert job.data == b"now"


@pytest.mark.fresh_server
def test_expired_counter_in_stats_counts_expiries(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    get_job(client, "GET q EXPIRE 0")
    _back_to(client, "q", (1, 1, 1, 0))
    assert stats(client, "q")["q"]["expired"] == 1
