"""Framing beyond the case files (cases/framing/): pipelining, split writes, bursts, slow readers."""
from __future__ import annotations

import re
import threading

from util import barrier, get_job, put_ok, total


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
