"""Numbers at the door (issue 16, breaks 1 and 10): a 400-digit DELAY, TTL or EXPIRE gets a
400 naming the bound instead of an `UNTIL inf` in the log that stopped every later record
at the next start; a 5,000-digit integer, before AUTH too, gets an error reply instead of a
ValueError that dropped the connection and the ack of a PUT pipelined before it."""
from __future__ import annotations

import re

import pytest

from tests.conftest import QueueServer, RawClient, StartServer
from tests.queue_server.util import drain, total

ALWAYS = ("--fsync", "always")
HUGE = b"9" * 400
SECONDS_BOUND = re.compile(rb"400 Bad Request: (DELAY|TTL|EXPIRE) must be 0\.\.10000000000 seconds.*")
JOBS_BEFORE = JOBS_AFTER = 50

# Every request that carries seconds, with a 400-digit value (and its data block if any).
HUGE_SECONDS = [
    b"PUT q 0 1 DELAY %s\r\nx" % HUGE,
    b"PUT q 0 1 TTL %s\r\nx" % HUGE,
    b"PUT q 0 1 NEW WAIT out EXPIRE %s\r\nx" % HUGE,
    b"GET q EXPIRE %s\r\n" % HUGE,
    b"GETB q COUNT 2 EXPIRE %s THEN DONE\r\n" % HUGE,
    b"TOUCH 1 EXPIRE %s\r\n" % HUGE,
    b"LATER 1 DELAY %s\r\n" % HUGE,
    b"FAIL 1 DELAY %s 1\r\nx" % HUGE,
]
# Those that neither wait nor block (on f5016ee the WAIT and GETB were served, inf and all).
HUGE_SECONDS_AT_ONCE = [request for request in HUGE_SECONDS if b"WAIT" not in request and b"GETB" not in request]
HUGE_DIGITS = b"7" * 5000


def _job(number: int) -> bytes:
    return b"job-%04d" % number


def _puts(first: int, count: int) -> bytes:
    return b"".join(b"PUT q 0 8\r\n" + _job(n) for n in range(first, first + count))


def test_a_400_digit_number_of_seconds_gets_400_naming_the_bound(queue_server: QueueServer) -> None:
    client = queue_server.connect()
    for request in HUGE_SECONDS:
        client.send(request)
        reply = client.line()
        assert SECONDS_BOUND.fullmatch(reply), f"{request[:40]!r}...: {reply!r}"
    assert client.request(b"TOTAL") == b"200 OK 0 0 0 0"  # nothing stored


@pytest.mark.parametrize("stop", ["kill -9", "SIGTERM"])
def test_acknowledged_jobs_all_come_back_after_requests_with_huge_numbers(
        start_queue_server: StartServer, stop: str) -> None:
    server = start_queue_server(*ALWAYS)
    client = server.connect()
    client.send(_puts(0, JOBS_BEFORE) + b"".join(HUGE_SECONDS_AT_ONCE) + _puts(JOBS_BEFORE, JOBS_AFTER))
    replies = [client.line() for _ in range(JOBS_BEFORE + len(HUGE_SECONDS_AT_ONCE) + JOBS_AFTER)]
    acknowledged = replies.count(b"200 OK")
    if stop == "kill -9":
        server.kill()
    else:
        server.terminate()
        assert server.wait_exit() == 0
    restarted = start_queue_server(*ALWAYS, data_dir=server.data_dir)
    client = restarted.connect()
    assert total(client)[2] == acknowledged  # f5016ee: 50 of the 103 it acknowledged
    assert acknowledged == JOBS_BEFORE + JOBS_AFTER, replies  # no huge number was stored
    assert [job.data for job in drain(client, "q")] == [_job(n) for n in range(acknowledged)]
    assert "recovery:" not in restarted.output_text(), restarted.output_text()


@pytest.mark.parametrize("request_line, error", [
    (b"DONE " + HUGE_DIGITS, b"400 Bad Request: job id must be at most 999999999999999999"),
    (b"LATER 1 2 " + HUGE_DIGITS, b"400 Bad Request: job id must be at most 999999999999999999"),
    (b"PUT q " + HUGE_DIGITS + b" 1\r\nx", b"400 Bad Request: priority out of 64-bit range"),
    (b"GET q COUNT " + HUGE_DIGITS, b"400 Bad Request: COUNT must be 1..9223372036854775807"),
    (b"JOBS q ready LIMIT " + HUGE_DIGITS, b"400 Bad Request: LIMIT must be 1..1000"),
    (b"INTERCONNECT 2 127.0.0.1 " + HUGE_DIGITS, b"400 Bad Request: port must be 1..65535"),
    (b"SYNC IDS " + HUGE_DIGITS + b" 1", b"400 Bad Request: counter must be 0..1000000000000000000"),
    (b"SYNC WAKE " + HUGE_DIGITS, b"400 Bad Request: unix time must be 0..100000000000, "
                                  b"in at most 32 characters"),
])
def test_a_5000_digit_integer_gets_an_error_and_the_put_before_it_its_ack(
        queue_server: QueueServer, request_line: bytes, error: bytes) -> None:
    client = queue_server.connect()
    client.send(b"PUT q 0 1\r\nx" + request_line + b"\r\nPING\r\n")
    client.expect(b"200 OK\r\n" + error + b"\r\n200 PONG\r\n")
    assert "Traceback" not in queue_server.output_text()


def test_a_5000_digit_length_is_a_block_over_the_limit_after_the_ack_before_it(
        queue_server: QueueServer) -> None:
    client = queue_server.connect()
    client.send(b"PUT q 0 1\r\nxPUT q 0 " + HUGE_DIGITS + b"\r\n")
    client.expect(b"200 OK\r\n413 Job Too Large\r\n")
    assert client.closed()
    assert RawClient(queue_server.host, queue_server.port).request(b"TOTAL q") == b"200 OK 1 1 1 0"


def test_huge_integers_before_auth_get_401_and_after_it_400(start_queue_server: StartServer) -> None:
    """Before AUTH a connection may send 4 KiB in all (door.py): 1,000 digits get the 401 of
    any request; 5,000 are over that bound (400 Line Too Long, closed). After AUTH 5,000
    digits get the 400 naming the bound, and the PUT before them its ack."""
    server = start_queue_server("--token", "s3cret")
    client = server.connect()
    thousand = b"7" * 1000
    client.send(b"DONE " + thousand + b"\r\nPUT q " + thousand + b" 1\r\nxPING\r\n")
    client.expect(b"401 Auth Required\r\n" * 3)
    client.send(b"AUTH s3cret\r\nPUT q 0 1\r\nxDONE " + HUGE_DIGITS + b"\r\nTOTAL\r\n")
    client.expect(b"200 OK\r\n200 OK\r\n400 Bad Request: job id must be at most 999999999999999999\r\n"
                  b"200 OK 1 1 1 0\r\n")
    other = server.connect()
    other.send(b"DONE " + HUGE_DIGITS + b"\r\n")
    other.expect(b"400 Line Too Long\r\n")
    assert other.closed()
    assert "Traceback" not in server.output_text()
