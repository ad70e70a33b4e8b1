"""PUT ... WAIT: the 206 reply, delivery of the item's output job, priority over GETB, disconnects."""
from __future__ import annotations

import re

from polling import DEADLINE_S
from util import assert_bad_request, barrier, get_job, poll_until, put_ok, read_job, runlist, total


def _wait_put(client, item_part: str = "IS it", extra: str = "") -> bytes:
    request = f"PUT in 0 5 {item_part} WAIT out {extra}".strip().encode()
    client.send(request + b"\r\nhello")
    return client.line()


def test_put_wait_replies_206_then_receives_the_output_job_of_its_item(queue_server):
    waiter, worker = queue_server.connect(), queue_server.connect()
    assert _wait_put(waiter) == b"206 Wait for output"
    task = get_job(worker, "GET in")
    assert (task.data, task.item) == (b"hello", "it")
    put_ok(worker, "out", 2, b"result", "IS it")
    line = waiter.line()
    match = re.fullmatch(rb"200 OK out ([0-9]+) 2 6 IS it", line)
    assert match, line
    waiter.expect(b"result")
    output_id = int(match[1])
    assert output_id not in (task.id,)
    assert total(worker, "out") == (1, 0, 0, 1)
    assert {entry.id for entry, _ in runlist(worker)} == {task.id, output_id}
    worker.send(b"DONE %d\r\n" % task.id)
    worker.expect(b"200 OK FINQ\r\n")
    waiter.send(b"DONE %d\r\n" % output_id)
    waiter.expect(b"200 OK FINQ FINI\r\n")


def test_put_new_wait_replies_206_with_the_new_item_name(queue_server):
    waiter, worker = queue_server.connect(), queue_server.connect()
    reply = _wait_put(waiter, "NEW")
    match = re.fullmatch(rb"206 Wait for output IS (_[0-9]+)", reply)
    assert match, reply
    item = match[1].decode()
    assert get_job(worker, "GET in").item == item
    put_ok(worker, "out", 0, b"done", f"IS {item}")
    job = read_job(waiter)
    assert job is not None and (job.queue, job.item, job.data) == ("out", item, b"done")


def test_output_job_of_another_item_is_not_delivered_to_the_waiter(queue_server):
    waiter, worker = queue_server.connect(), queue_server.connect()
    assert _wait_put(waiter) == b"206 Wait for output"
    put_ok(worker, "out", 0, b"someone else's", "IS other")
    put_ok(worker, "elsewhere", 0, b"wrong queue", "IS it")
    barrier(worker)
    assert waiter.pending() == b""
    assert total(worker, "out") == (1, 1, 1, 0)
    assert get_job(worker, "GET out").item == "other"


def test_wait_client_gets_its_output_ahead_of_a_getb_client_already_blocked(queue_server):
    getb, waiter, worker = queue_server.connect(), queue_server.connect(), queue_server.connect()
    getb.send(b"GETB out\r\n")
    barrier(worker)
    assert _wait_put(waiter) == b"206 Wait for output"
    put_ok(worker, "out", 0, b"for the waiter", "IS it")
    job = read_job(waiter)
    assert job is not None and job.data == b"for the waiter"
    barrier(worker)
    assert getb.pending() == b""
    put_ok(worker, "out", 0, b"for getb", "IS other")
    job = read_job(getb)
    assert job is not None and job.data == b"for getb"


def test_output_job_stays_in_its_queue_when_the_waiter_has_disconnected(queue_server):
    waiter, worker = queue_server.connect(), queue_server.connect()
    assert _wait_put(waiter) == b"206 Wait for output"
    waiter.close()
    barrier(worker)
    put_ok(worker, "out", 0, b"orphan", "IS it")
    assert total(worker, "out") == (1, 1, 1, 0)
    job = get_job(worker, "GET out")
    assert (job.data, job.item) == (b"orphan", "it")


def test_wait_expire_applies_to_the_delivered_output_job(queue_server):
    waiter, worker = queue_server.connect(), queue_server.connect()
    assert _wait_put(waiter, extra="EXPIRE 0.3") == b"206 Wait for output"
    put_ok(worker, "out", 0, b"r", "IS it")
    job = read_job(waiter)
    assert job is not None
    # DEADLINE_S, not 5 s: an EXPIRE not applied keeps the job for the 60 s default lock.
    poll_until(lambda: total(worker, "out") == (1, 1, 1, 0), DEADLINE_S, what="output job expired back")


def test_wait_expire_then_done_deletes_the_delivered_output_job(queue_server):
    waiter, worker = queue_server.connect(), queue_server.connect()
    assert _wait_put(waiter, extra="EXPIRE 0.3 THEN DONE") == b"206 Wait for output"
    put_ok(worker, "out", 0, b"r", "IS it")
    assert read_job(waiter) is not None
    poll_until(lambda: total(worker, "out") == (0, 0, 0, 0), DEADLINE_S, what="output job expired away")


def test_wait_without_is_or_new_is_a_bad_request_that_consumes_the_data(queue_server):
    client = queue_server.connect()
    client.send(b"PUT in 0 3 WAIT out\r\nabcPING\r\n")
    assert_bad_request(client.line())
    client.expect(b"200 PONG\r\n")
    assert total(client) == (0, 0, 0, 0)


def test_wait_input_job_is_stored_like_any_put(queue_server):
    waiter, worker = queue_server.connect(), queue_server.connect()
    assert _wait_put(waiter) == b"206 Wait for output"
    assert total(worker, "in") == (1, 1, 1, 0)
    assert total(worker, "out") == (0, 0, 0, 0)


def test_request_pipelined_behind_put_wait_is_answered_after_the_output_job(queue_server):
    waiter, worker = queue_server.connect(), queue_server.connect()
    waiter.send(b"PUT in 0 1 IS it WAIT out\r\nxPING\r\n")
    waiter.expect(b"206 Wait for output\r\n")
    barrier(worker)
    assert waiter.pending() == b"", "PING must wait for the output job"
    put_ok(worker, "out", 0, b"result", "IS it")
    line = waiter.line()
    assert re.fullmatch(rb"200 OK out [0-9]+ 0 6 IS it", line), line
    waiter.expect(b"result200 PONG\r\n")
