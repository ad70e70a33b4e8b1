"""Framing: CRLF and bare LF lines, empty lines, unterminated data blocks, pipelining, split writes."""
from __future__ import annotations

import re
import threading

from util import barrier, get_job, put_ok, total


def test_request_ending_in_crlf_gets_a_crlf_reply(queue_server):
    client = queue_server.connect()
    client.send(b"PING\r\n")
    client.expect(b"200 PONG\r\n")


def test_request_ending_in_bare_lf_is_accepted_and_the_reply_still_ends_in_crlf(queue_server):
    client = queue_server.connect()
    client.send(b"PING\n")
    client.expect(b"200 PONG\r\n")
    client.send(b"PUT q 0 3\nabcGET q\n")
    client.expect(b"200 OK\r\n")
    line = client.line()
    assert re.fullmatch(rb"200 OK q [0-9]+ 0 3", line), line
    client.expect(b"abc")


def test_empty_lines_get_no_reply(queue_server):
    client = queue_server.connect()
    client.send(b"\r\n\n\r\n\nPING\r\n\r\n")
    client.expect(b"200 PONG\r\n")
    client.send(b"TOTAL\r\n")
    client.expect(b"200 OK 0 0 0 0\r\n")


def test_data_block_has_no_terminator_and_the_next_request_follows_at_once(queue_server):
    client = queue_server.connect()
    client.send(b"PUT q 0 5\r\nhelloPING\r\n")
    client.expect(b"200 OK\r\n200 PONG\r\n")


def test_crlf_written_after_a_data_block_is_an_ignored_empty_line(queue_server):
    client = queue_server.connect()
    client.send(b"PUT q 0 5\r\nhello\r\nPING\r\n")
    client.expect(b"200 OK\r\n200 PONG\r\n")
    job = get_job(client, "GET q")
    assert job.data == b"hello"


def test_data_block_may_hold_line_breaks_and_command_words_verbatim(queue_server):
    client = queue_server.connect()
    payload = b"PING\r\nQUIT\r\n\nSHUTDOWN\n\r"
    client.send(b"PUT q 0 %d\r\n" % len(payload) + payload + b"PING\r\n")
    client.expect(b"200 OK\r\n200 PONG\r\n")
    job = get_job(client, "GET q")
    assert job.data == payload


def test_every_byte_value_round_trips_in_a_data_block(queue_server):
    client = queue_server.connect()
    payload = bytes(range(256)) * 4
    put_ok(client, "q", 0, payload)
    assert get_job(client, "GET q").data == payload


def test_reply_data_block_has_no_terminator(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 7, b"hello")
    client.send(b"GET q\r\nPING\r\n")
    line = client.line()
    assert re.fullmatch(rb"200 OK q [0-9]+ 7 5", line), line
    client.expect(b"hello200 PONG\r\n")


def test_empty_data_block_is_a_valid_job(queue_server):
    client = queue_server.connect()
    client.send(b"PUT q 0 0\r\nPING\r\n")
    client.expect(b"200 OK\r\n200 PONG\r\n")
    client.send(b"GET q\r\nPING\r\n")
    line = client.line()
    assert re.fullmatch(rb"200 OK q [0-9]+ 0 0", line), line
    client.expect(b"200 PONG\r\n")


def test_pipelined_requests_in_one_write_are_answered_in_order(queue_server):
    client = queue_server.connect()
    requests = b"".join(b"PUT q %d 2\r\n%02d" % (n, n) for n in range(50))
    requests += b"TOTAL q\r\n" + b"GET q\r\n" * 50 + b"GET q\r\nPING\r\n"
    client.send(requests)
    client.expect(b"200 OK\r\n" * 50)
    client.expect(b"200 OK 1 50 50 0\r\n")
    for n in reversed(range(50)):
        line = client.line()
        assert re.fullmatch(rb"200 OK q [0-9]+ %d 2" % n, line), line
        client.expect(b"%02d" % n)
    client.expect(b"404 Queue Empty\r\n200 PONG\r\n")


def test_request_written_one_byte_at_a_time_is_parsed_like_one_write(queue_server):
    client = queue_server.connect()
    observer = queue_server.connect()
    stream = b"PUT q 3 5 IS it\r\nhe\nloGET q\nPING\r\n"
    for byte in stream:
        client.send(bytes([byte]))
        barrier(observer)  # the server has read this byte before the next one is sent
    client.expect(b"200 OK\r\n")
    line = client.line()
    assert re.fullmatch(rb"200 OK q [0-9]+ 3 5 IS it", line), line
    client.expect(b"he\nlo200 PONG\r\n")


def test_crlf_split_between_two_writes_ends_one_line(queue_server):
    client = queue_server.connect()
    observer = queue_server.connect()
    client.send(b"PING\r")
    barrier(observer)
    client.send(b"\n")
    client.expect(b"200 PONG\r\n")
    client.send(b"PING\r\n")
    client.expect(b"200 PONG\r\n")


def test_data_block_split_across_many_writes_is_reassembled(queue_server):
    client = queue_server.connect()
    observer = queue_server.connect()
    payload = bytes(range(200))
    client.send(b"PUT q 0 200\r\n")
    for start in range(0, 200, 37):
        client.send(payload[start:start + 37])
        barrier(observer)
    client.expect(b"200 OK\r\n")
    assert total(observer, "q") == (1, 1, 1, 0)
    assert get_job(observer, "GET q").data == payload


def test_incomplete_line_gets_no_reply_until_its_terminator_arrives(queue_server):
    client = queue_server.connect()
    observer = queue_server.connect()
    client.send(b"PIN")
    barrier(observer)
    assert client.pending() == b""
    client.send(b"G\r\n")
    client.expect(b"200 PONG\r\n")


def test_burst_larger_than_the_socket_buffers_is_answered_completely_in_order(queue_server):
    client = queue_server.connect(timeout_s=30.0)
    put_ok(client, "q", 0, b"x")
    count = 10000
    burst = b"TOTAL\r\nTOTAL nope\r\n" * count
    sender = threading.Thread(target=client.send, args=(burst,), daemon=True)
    sender.start()
    client.expect(b"200 OK 1 1 1 0\r\n200 OK 0 0 0 0\r\n" * count)
    sender.join(timeout=30)
    client.send(b"PING\r\n")
    client.expect(b"200 PONG\r\n")


def test_client_that_does_not_read_its_replies_does_not_stall_others(queue_server):
    hog, other = queue_server.connect(), queue_server.connect()
    put_ok(hog, "big", 0, b"B" * 65536)
    get_job(hog, "GET big")
    requests = b"RUNLIST DATA\r\n" * 100  # about 6.5 MB of replies that are never read
    threading.Thread(target=_send_ignoring_errors, args=(hog, requests), daemon=True).start()
    for n in range(20):
        put_ok(other, "q", 0, b"%d" % n)
        assert total(other, "q") == (1, 1, n + 1, 0)
    hog.close()
    barrier(other)


def _send_ignoring_errors(client, data: bytes) -> None:
    try:
        client.sock.sendall(data)
    except OSError:
        pass  # the test closed the connection while this was still sending
