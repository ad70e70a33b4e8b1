"""GETB and GETBE: waiting, first-come first-served, disconnected waiters, GETBE's 404."""
from __future__ import annotations

import re

from util import barrier, get_job, put_ok, read_batch, read_job, runlist, total


def _block(client, observer, request: bytes) -> None:
    """Send a blocking request and make sure the server has queued it before going on.

    A job handed out with EXPIRE before this must outlast it: 2 s locks, since on a busy
    shared machine half a second could pass and the expiry answer the request first.
    """
    client.send(request + b"\r\n")
    barrier(observer)
    assert client.pending() == b"", f"{request!r} should still be waiting"


def test_getb_with_a_ready_job_replies_at_once(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 1, b"ready")
    job = get_job(client, "GETB q")
    assert (job.queue, job.priority, job.data) == ("q", 1, b"ready")


def test_getb_waits_until_a_job_is_put(queue_server):
    waiter, producer = queue_server.connect(), queue_server.connect()
    _block(waiter, producer, b"GETB q")
    put_ok(producer, "q", 3, b"arrived", "IS it")
    job = read_job(waiter)
    assert job is not None
    assert (job.queue, job.priority, job.data, job.item) == ("q", 3, b"arrived", "it")
    assert total(producer, "q") == (1, 0, 0, 1)


def test_getb_waiters_are_served_first_come_first_served(queue_server):
    producer = queue_server.connect()
    waiters = [queue_server.connect() for _ in range(3)]
    for waiter in waiters:
        _block(waiter, producer, b"GETB q")
    for n in range(3):
        put_ok(producer, "q", 0, b"job%d" % n)
    got = [read_job(waiter) for waiter in waiters]
    assert [job.data for job in got if job] == [b"job0", b"job1", b"job2"]


def test_getb_ignores_jobs_of_queues_it_does_not_wait_for(queue_server):
    waiter, producer = queue_server.connect(), queue_server.connect()
    _block(waiter, producer, b"GETB a|b")
    put_ok(producer, "c", 0, b"not for you")
    barrier(producer)
    assert waiter.pending() == b""
    put_ok(producer, "b", 0, b"for you")
    job = read_job(waiter)
    assert job is not None and (job.queue, job.data) == ("b", b"for you")
    assert total(producer, "c") == (1, 1, 1, 0)


def test_getb_without_a_queue_takes_a_job_of_any_queue(queue_server):
    waiter, producer = queue_server.connect(), queue_server.connect()
    _block(waiter, producer, b"GETB")
    put_ok(producer, "anything", 0, b"x")
    job = read_job(waiter)
    assert job is not None and job.queue == "anything"


def test_job_for_a_disconnected_waiter_goes_to_the_next_waiter(queue_server):
    producer = queue_server.connect()
    gone, next_waiter = queue_server.connect(), queue_server.connect()
    _block(gone, producer, b"GETB q")
    _block(next_waiter, producer, b"GETB q")
    gone.close()
    barrier(producer)
    put_ok(producer, "q", 0, b"precious")
    job = read_job(next_waiter)
    assert job is not None and job.data == b"precious"


def test_job_for_a_disconnected_lone_waiter_stays_queued(queue_server):
    producer = queue_server.connect()
    gone = queue_server.connect()
    _block(gone, producer, b"GETB q")
    gone.close()
    barrier(producer)
    put_ok(producer, "q", 0, b"precious")
    assert total(producer, "q") == (1, 1, 1, 0)
    assert runlist(producer) == []
    assert get_job(producer, "GET q").data == b"precious"


def test_getb_expire_applies_to_the_job_it_receives(queue_server):
    waiter, producer = queue_server.connect(), queue_server.connect()
    _block(waiter, producer, b"GETB q EXPIRE 1000")
    put_ok(producer, "q", 0, b"x")
    job = read_job(waiter)
    assert job is not None
    (entry, _), = runlist(producer)
    assert entry.id == job.id and entry.expire_at is not None


def test_getb_count_waits_for_one_job_then_takes_what_is_ready(queue_server):
    waiter, producer = queue_server.connect(), queue_server.connect()
    _block(waiter, producer, b"GETB q COUNT 5")
    put_ok(producer, "q", 0, b"first")
    jobs = read_batch(waiter)
    assert [job.data for job in jobs] == [b"first"]


def test_getbe_with_nothing_ready_and_nothing_running_replies_404_at_once(queue_server):
    client = queue_server.connect()
    client.send(b"GETBE q\r\nGETBE\r\nGETBE a|b\r\n")
    client.expect(b"404 Queue Empty\r\n" * 3)


def test_getbe_with_a_ready_job_replies_like_get(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x")
    assert get_job(client, "GETBE q").data == b"x"


def test_getbe_ignores_running_jobs_of_other_queues(queue_server):
    client = queue_server.connect()
    put_ok(client, "other", 0, b"x")
    get_job(client, "GET other")
    client.send(b"GETBE q\r\n")
    client.expect(b"404 Queue Empty\r\n")


def test_getbe_replies_404_when_the_last_running_job_of_its_queue_is_done(queue_server):
    worker, waiter = queue_server.connect(), queue_server.connect()
    put_ok(worker, "q", 0, b"a")
    put_ok(worker, "q", 0, b"b")
    first, second = get_job(worker, "GET q"), get_job(worker, "GET q")
    _block(waiter, worker, b"GETBE q")
    worker.send(b"DONE %d\r\n" % first.id)
    worker.expect(b"200 OK\r\n")
    barrier(worker)
    assert waiter.pending() == b"", "one job of q is still running"
    worker.send(b"DONE %d\r\n" % second.id)
    worker.expect(b"200 OK FINQ\r\n")
    waiter.expect(b"404 Queue Empty\r\n")


def test_getbe_without_a_queue_waits_for_running_jobs_of_any_queue(queue_server):
    worker, waiter = queue_server.connect(), queue_server.connect()
    put_ok(worker, "q", 0, b"a")
    job = get_job(worker, "GET q")
    _block(waiter, worker, b"GETBE")
    worker.send(b"DONE %d\r\n" % job.id)
    worker.expect(b"200 OK FINQ\r\n")
    waiter.expect(b"404 Queue Empty\r\n")


def test_getbe_receives_a_job_that_later_makes_ready(queue_server):
    worker, waiter = queue_server.connect(), queue_server.connect()
    put_ok(worker, "q", 4, b"retry me", "IS it")
    job = get_job(worker, "GET q")
    _block(waiter, worker, b"GETBE q")
    worker.send(b"LATER %d\r\n" % job.id)
    worker.expect(b"200 OK\r\n")
    again = read_job(waiter)
    assert again is not None
    assert (again.queue, again.priority, again.data, again.item) == ("q", 4, b"retry me", "it")
    assert again.id != job.id


def test_getbe_receives_a_job_put_while_it_waits(queue_server):
    worker, waiter = queue_server.connect(), queue_server.connect()
    put_ok(worker, "q", 0, b"running")
    get_job(worker, "GET q")
    _block(waiter, worker, b"GETBE q")
    put_ok(worker, "q", 0, b"new")
    job = read_job(waiter)
    assert job is not None and job.data == b"new"


def test_getbe_replies_404_when_the_running_job_expires_as_done(queue_server):
    worker, waiter = queue_server.connect(), queue_server.connect()
    put_ok(worker, "q", 0, b"x")
    get_job(worker, "GET q EXPIRE 2 THEN DONE")
    _block(waiter, worker, b"GETBE q")
    waiter.expect(b"404 Queue Empty\r\n")
    assert total(worker) == (0, 0, 0, 0)


def test_getbe_receives_the_running_job_when_it_expires_back_to_ready(queue_server):
    worker, waiter = queue_server.connect(), queue_server.connect()
    put_ok(worker, "q", 0, b"x")
    job = get_job(worker, "GET q EXPIRE 2 THEN LATER")
    _block(waiter, worker, b"GETBE q")
    again = read_job(waiter)
    assert again is not None and again.data == b"x" and again.id != job.id


def test_getbe_is_not_kept_waiting_by_a_delayed_job(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x", "DELAY 1000")
    client.send(b"GETBE q\r\n")
    client.expect(b"404 Queue Empty\r\n")


def test_getbe_with_running_and_delayed_jobs_replies_404_once_the_running_one_is_done(queue_server):
    worker, waiter = queue_server.connect(), queue_server.connect()
    put_ok(worker, "q", 0, b"run")
    job = get_job(worker, "GET q")
    put_ok(worker, "q", 0, b"sleep", "DELAY 1000")
    _block(waiter, worker, b"GETBE q")
    worker.send(b"DONE %d\r\n" % job.id)
    worker.expect(b"200 OK\r\n")  # the delayed job keeps the queue non-empty: no FINQ
    waiter.expect(b"404 Queue Empty\r\n")


def test_getb_receives_a_delayed_job_when_it_activates(queue_server):
    waiter, producer = queue_server.connect(), queue_server.connect()
    _block(waiter, producer, b"GETB q")
    put_ok(producer, "q", 0, b"soon", "DELAY 0.3")
    job = read_job(waiter)
    assert job is not None and job.data == b"soon"


def test_getb_reply_line_matches_the_get_format(queue_server):
    waiter, producer = queue_server.connect(), queue_server.connect()
    _block(waiter, producer, b"GETB q")
    put_ok(producer, "q", -7, b"abc")
    line = waiter.line()
    assert re.fullmatch(rb"200 OK q [0-9]+ -7 3", line), line
    waiter.expect(b"abc")


def test_later_wakes_a_blocked_getb_waiter(queue_server):
    worker, waiter = queue_server.connect(), queue_server.connect()
    put_ok(worker, "q", 0, b"retry")
    job = get_job(worker, "GET q")
    _block(waiter, worker, b"GETB q")
    worker.send(b"LATER %d\r\n" % job.id)
    worker.expect(b"200 OK\r\n")
    again = read_job(waiter)
    assert again is not None and again.data == b"retry" and again.id != job.id


def test_job_expiring_back_to_ready_wakes_a_blocked_getb_waiter(queue_server):
    worker, waiter = queue_server.connect(), queue_server.connect()
    put_ok(worker, "q", 0, b"expires")
    get_job(worker, "GET q EXPIRE 2")
    _block(waiter, worker, b"GETB q")
    again = read_job(waiter)
    assert again is not None and again.data == b"expires"


def test_getbe_replies_404_when_the_last_running_job_is_postponed_with_later_delay(queue_server):
    worker, waiter = queue_server.connect(), queue_server.connect()
    put_ok(worker, "q", 0, b"x")
    job = get_job(worker, "GET q")
    _block(waiter, worker, b"GETBE q")
    worker.send(b"LATER %d DELAY 1000\r\n" % job.id)
    worker.expect(b"200 OK\r\n")
    waiter.expect(b"404 Queue Empty\r\n")  # fine point 4: a delayed job does not keep GETBE waiting


def test_getb_fcfs_counts_only_waiters_that_want_the_queue(queue_server):
    producer = queue_server.connect()
    only_a, only_b, either = queue_server.connect(), queue_server.connect(), queue_server.connect()
    _block(only_a, producer, b"GETB a")
    _block(only_b, producer, b"GETB b")
    _block(either, producer, b"GETB a|b")
    put_ok(producer, "b", 0, b"for b")
    job = read_job(only_b)
    assert job is not None and job.data == b"for b"
    put_ok(producer, "b", 0, b"second b")
    job = read_job(either)
    assert job is not None and job.data == b"second b"
    barrier(producer)
    assert only_a.pending() == b""


def test_request_pipelined_behind_a_blocked_getb_is_answered_after_it(queue_server):
    waiter, producer = queue_server.connect(), queue_server.connect()
    waiter.send(b"GETB q\r\nPING\r\n")
    barrier(producer)
    assert waiter.pending() == b"", "PING must not be answered before the blocked GETB"
    put_ok(producer, "q", 0, b"job")
    line = waiter.line()
    assert re.fullmatch(rb"200 OK q [0-9]+ 0 3", line), line
    waiter.expect(b"job200 PONG\r\n")
