"""A role holding one token, as an attacker would use it: a role bound to some queues
(`worker_queues`, ...) reaching other queues' jobs through the commands that name a lease
id or a key instead of a queue, and a signed-in connection guessing other roles' tokens
with a second AUTH. Real servers, raw sockets."""
from __future__ import annotations

import json
import time

import pytest

from tests.queue_server.test_roles_table import TOKENS, role_config, signed_in
from tests.queue_server.util import get_job, put, put_ok

FOREIGN = b"403 Forbidden: lease %d is in a queue not among the worker role's queues"


@pytest.fixture
def bound(start_queue_server, tmp_path):  # type: ignore[no-untyped-def]
    return start_queue_server(config=role_config(
        tmp_path, worker_queues='["mail*"]', producer_queues='["mail*"]', operator_queues='["mail*"]'))


def test_a_bound_worker_cannot_finish_fail_or_extend_another_queues_job_by_its_id(bound):
    admin = signed_in(bound, "admin")
    for key in ("s1", "s2", "s3", "s4"):
        assert put(admin, "secrets", 0, b"payroll", f"KEY {key}") == f"200 OK KEY {key}".encode()
    taken = [get_job(admin, "GET secrets").id for _ in range(4)]  # lease ids 1..4: guessable
    worker = signed_in(bound, "worker")
    assert worker.request(b"DONE %d" % taken[0]) == FOREIGN % taken[0]
    assert worker.request(b"DONE 999999 %d" % taken[0]) == FOREIGN % taken[0]  # one foreign id: none done
    assert worker.request(b"LATER %d" % taken[1]) == FOREIGN % taken[1]
    assert worker.request(b"TOUCH %d" % taken[2]) == FOREIGN % taken[2]
    assert worker.request(b"FAIL %d 1\r\nx" % taken[3]) == FOREIGN % taken[3]
    assert worker.request(b"DONE %d RESULT 1\r\nx" % taken[3]) == FOREIGN % taken[3]
    assert admin.request(b"TOTAL secrets") == b"200 OK 1 0 0 4"  # all four still running, untouched
    # Its own queue's jobs and unknown ids are answered as before.
    put_ok(worker, "mail_out", 0, b"hi")
    own = get_job(worker, "GET mail_out").id
    assert worker.request(b"TOUCH %d" % own) == b"200 OK"
    assert worker.request(b"DONE %d" % own) == b"200 OK FINQ"  # (its queue is empty now)
    assert worker.request(b"DONE 999999") == b"404 Job Not Found"
    # An unbound role (the admin here) still finishes any queue's job.
    assert admin.request(b"DONE %d" % taken[0]) == b"200 OK"
    assert TOKENS["worker"] not in bound.output_text()


def test_a_bound_role_cannot_read_another_queues_job_by_its_key(bound):
    admin = signed_in(bound, "admin")
    assert put(admin, "secrets", 0, b"payroll", "KEY salary") == b"200 OK KEY salary"
    assert put(admin, "mail_out", 0, b"hello", "KEY greeting") == b"200 OK KEY greeting"
    for role in ("producer", "worker", "operator"):
        client = signed_in(bound, role)
        reply = client.request(b"JOB salary")
        assert reply == (b"403 Forbidden: JOB: the job is in a queue not among the %s role's queues"
                         % role.encode()), reply
        reply = client.request(b"JOB greeting")
        assert reply.startswith(b"200 OK "), reply
        assert json.loads(client.exact(int(reply.split()[2])))["data"] == "hello"
        assert client.request(b"JOB nosuchkey") == b"404 Job Not Found"
    reply = admin.request(b"JOB salary")
    assert json.loads(admin.exact(int(reply.split()[2])))["data"] == "payroll"


def test_a_wrong_auth_after_a_right_one_is_held_back_and_the_fifth_closes(bound):
    producer = signed_in(bound, "producer")
    producer.send(b"AUTH guess1\r\nSHUTDOWN\r\n")  # pipelined: SHUTDOWN waits for the 401
    started = time.monotonic()
    assert producer.line() == b"401 Unauthorized"
    assert time.monotonic() - started >= 0.09
    # Still the producer: the wrong AUTH changed nothing.
    assert producer.line() == b"403 Forbidden: SHUTDOWN needs the admin role"
    for attempt in range(2, 5):
        assert producer.request(b"AUTH guess%d" % attempt) == b"401 Unauthorized"
    producer.send(b"AUTH guess5\r\n")
    assert producer.line() == b"401 Unauthorized"
    assert producer.closed()
    log = bound.output_text()
    assert "wrong AUTH" in log and "guess" not in log
    # A right AUTH switching the role is answered at once, as before.
    switching = signed_in(bound, "producer")
    assert switching.request(f"AUTH {TOKENS['operator']}".encode()) == b"200 OK"
    assert switching.request(b"RETRY mail nosuchkey") == b"404 Job Not Found"  # run, not refused


def test_without_tokens_a_second_auth_is_still_answered_at_once(queue_server):
    client = queue_server.connect()
    client.send(b"AUTH anything\r\nAUTH other\r\nPING\r\n")
    client.expect(b"200 OK\r\n200 OK\r\n200 PONG\r\n")


def test_a_bound_operator_cannot_cancel_another_queues_job(bound):
    admin = signed_in(bound, "admin")
    assert put(admin, "secrets", 0, b"payroll", "KEY s1") == b"200 OK KEY s1"
    operator = signed_in(bound, "operator")
    assert operator.request(b"CANCEL secrets s1") == (
        b"403 Forbidden: queue secrets is not among the operator role's queues")
    assert admin.request(b"TOTAL secrets") == b"200 OK 1 1 1 0"  # still there
    assert put(admin, "mail_out", 0, b"hi", "KEY m1") == b"200 OK KEY m1"
    assert operator.request(b"CANCEL mail_out m1") == b"200 OK removed"
