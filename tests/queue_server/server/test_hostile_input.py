"""Hostile input at the queue server's door, on real processes: huge data blocks before AUTH,
HTTP requests sent to the queue port, too many connections, idle connections, token guessing."""
from __future__ import annotations

import socket
import time

import pytest
from hostile import RSS_MARGIN_BYTES, rss_bytes, served
from polling import DEADLINE_S

from tests.conftest import HOST, QueueServer
from tests.queue_server.util import poll_until, put_ok, total

TOKEN = "door_T0ken"
TOKEN_CONFIG = f'[queue_server]\ntoken = "{TOKEN}"\n'
ZEROS = bytes(1024 * 1024)
IDLE_TIMEOUT_S = 1.0


def _push_until_refused(sock: socket.socket, total_bytes: int) -> int:
    """Send zeros until `total_bytes` or the server cuts the stream; bytes sent."""
    sent = 0
    sock.settimeout(5.0)
    try:
        while sent < total_bytes:
            sock.sendall(ZEROS)
            sent += len(ZEROS)
    except OSError:
        pass
    return sent


@pytest.mark.parametrize("request_line", [b"PUT q 0 1099511627776", b"CLONE 34359738368",
                                          b"SYNC PUT q 0 1099511627776"])
def test_a_huge_block_before_auth_gets_413_and_close_and_memory_stays_flat(start_queue_server,
                                                                           request_line):
    server = start_queue_server(config=TOKEN_CONFIG)
    before = rss_bytes(server.process.pid)
    attacker = server.connect()
    attacker.send(request_line + b"\r\n")
    attacker.expect(b"413 Job Too Large\r\n")
    _push_until_refused(attacker.sock, 256 * 1024 * 1024)
    assert attacker.closed()
    assert rss_bytes(server.process.pid) < before + RSS_MARGIN_BYTES
    assert served(server, TOKEN)


def test_a_block_within_max_job_bytes_before_auth_is_still_swallowed_and_refused(start_queue_server):
    server = start_queue_server(config=TOKEN_CONFIG)
    client = server.connect()
    client.send(b"PUT q 0 5\r\nhello" + f"AUTH {TOKEN}\r\n".encode())
    client.expect(b"401 Auth Required\r\n200 OK\r\n")
    assert total(client, "q") == (0, 0, 0, 0)


def test_clone_over_max_job_bytes_is_taken_after_auth(start_queue_server):
    server = start_queue_server(config=TOKEN_CONFIG)
    client = server.connect()
    client.send(f"AUTH {TOKEN}\r\n".encode())
    client.expect(b"200 OK\r\n")
    blob = b"x" * (2 * 1024 * 1024)
    client.send(b"CLONE %d\r\n" % len(blob) + blob)
    client.expect(b"500 Invalid Snapshot\r\n")  # read in full, then refused as garbage
    assert client.request(b"PING") == b"200 PONG"


@pytest.mark.parametrize("attack", [
    b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
    b"Content-Length: 18\r\n\r\nPUT evil 0 1\r\nxSHUTDOWN\r\n",
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nSHUTDOWN\r\n",
    b"OPTIONS * HTTP/1.0\r\n\r\nSHUTDOWN\r\n",
    b"Host: 127.0.0.1:7400\r\nSHUTDOWN\r\n",
    b"post /x HTTP/1.1\r\nSHUTDOWN\r\n",
])
def test_an_http_request_is_closed_before_any_later_line_runs(queue_server, attack):
    client = queue_server.connect()
    client.send(attack)
    assert client.closed()
    assert client.pending() == b""
    assert queue_server.is_running()
    checker = queue_server.connect()
    assert total(checker, "evil") == (0, 0, 0, 0)
    assert "cross-protocol" in queue_server.output_text()


def test_replies_to_requests_before_an_http_line_are_still_sent(queue_server):
    client = queue_server.connect()
    client.send(b"PING\r\nPUT q 0 1\r\nxPOST / HTTP/1.1\r\n\r\nSHUTDOWN\r\n")
    client.expect(b"200 PONG\r\n200 OK\r\n")
    assert client.closed()
    assert queue_server.is_running()


def test_an_http_line_before_auth_is_closed_too(start_queue_server):
    server = start_queue_server(config=TOKEN_CONFIG)
    client = server.connect()
    client.send(b"POST / HTTP/1.1\r\n\r\n" + f"AUTH {TOKEN}\r\nSHUTDOWN\r\n".encode())
    assert client.closed()
    assert client.pending() == b""
    assert server.is_running()


@pytest.mark.parametrize("line", [b"GET q", b"GET a|b EXPIRE 5", b"GETB q COUNT 2"])
def test_sockpqd_gets_are_not_taken_for_http(queue_server, line):
    client = queue_server.connect()
    put_ok(client, "a", 0, b"1")
    put_ok(client, "q", 0, b"1")
    put_ok(client, "q", 0, b"2")
    client.send(line + b"\r\n")
    assert client.line().startswith(b"200 OK")


def test_over_max_clients_a_connection_gets_one_error_line_and_is_closed(start_queue_server):
    server = start_queue_server(config="[queue_server]\nmax_clients = 5\n")
    held = [server.connect() for _ in range(5)]
    for client in held:
        assert client.request(b"PING") == b"200 PONG"
    extra = server.connect()
    extra.expect(b"503 Too Many Clients\r\n")
    assert extra.closed()
    held.pop().close()
    poll_until(lambda: served(server), what="a slot freed by a closed client")
    assert held[0].request(b"PING") == b"200 PONG"
    assert "max_clients (5)" in server.output_text()


def talked_throughout(server: QueueServer, span_s: float) -> bool:
    """A new connection sends PING every 0.2 s for `span_s`: True when it was answered
    throughout; False when two requests came IDLE_TIMEOUT_S * 0.9 apart (a busy machine held
    this process back, and the server may rightly have closed it); AssertionError when it
    was closed though it kept talking."""
    talking = server.connect()
    started = last_sent_at = time.monotonic()
    while (now := time.monotonic()) - started < span_s:
        if now - last_sent_at >= IDLE_TIMEOUT_S * 0.9:
            talking.close()
            return False
        last_sent_at = now
        assert talking.request(b"PING") == b"200 PONG", "closed while talking"
        time.sleep(0.2)
    talking.close()
    return True


def test_idle_connections_are_closed_after_idle_timeout_but_blocked_waits_are_not(start_queue_server):
    server = start_queue_server(config=f"[queue_server]\nidle_timeout_s = {IDLE_TIMEOUT_S}\n")
    idle = server.connect(timeout_s=15.0)
    blocked = server.connect(timeout_s=15.0)
    blocked.send(b"GETB waited\r\n")
    started = time.monotonic()
    assert idle.closed(timeout_s=DEADLINE_S)
    assert time.monotonic() - started >= 0.9
    # Keeps talking: never idle, for more than twice the timeout (again from a new connection
    # when this process was held back for most of the timeout between two requests).
    poll_until(lambda: talked_throughout(server, 2.5), what="2.5 s of PINGs never 0.9 s apart")
    producer = server.connect()
    put_ok(producer, "waited", 0, b"job")
    assert blocked.line().startswith(b"200 OK waited ")
    assert "idle_timeout_s" in server.output_text()


def test_without_idle_timeout_an_idle_connection_stays(queue_server):
    client = queue_server.connect()
    assert not client.closed(timeout_s=1.5)
    assert client.request(b"PING") == b"200 PONG"


def test_wrong_auth_is_answered_later_each_time_and_the_fifth_closes(start_queue_server):
    server = start_queue_server(config=TOKEN_CONFIG)
    client = server.connect(timeout_s=15.0)
    delays = []
    for _ in range(4):
        started = time.monotonic()
        assert client.request(b"AUTH guess") == b"401 Unauthorized"
        delays.append(time.monotonic() - started)
    assert delays[0] >= 0.09
    assert delays[3] >= 0.79
    assert delays[3] > delays[0]
    client.send(b"AUTH guess\r\n")
    client.expect(b"401 Unauthorized\r\n")
    assert client.closed()
    other = server.connect()
    assert other.request(f"AUTH {TOKEN}".encode()) == b"200 OK"
    log = server.output_text()
    assert "wrong AUTH" in log and "guess" not in log


def test_a_right_auth_after_a_wrong_one_is_answered_in_order(start_queue_server):
    server = start_queue_server(config=TOKEN_CONFIG)
    client = server.connect()
    client.send(f"AUTH nope\r\nAUTH {TOKEN}\r\nPING\r\n".encode())
    client.expect(b"401 Unauthorized\r\n200 OK\r\n200 PONG\r\n")


def test_many_connections_cost_bounded_memory_and_a_new_client_is_served(start_queue_server):
    server = start_queue_server(config="[queue_server]\nmax_clients = 300\n")
    before = rss_bytes(server.process.pid)
    sockets = []
    try:
        for _ in range(400):
            sock = socket.create_connection((HOST, server.port), timeout=5.0)
            sockets.append(sock)
        poll_until(lambda: "max_clients (300)" in server.output_text(), what="refusals logged")
        assert rss_bytes(server.process.pid) < before + RSS_MARGIN_BYTES
    finally:
        for sock in sockets:
            sock.close()
    poll_until(lambda: served(server), what="a new client served")
