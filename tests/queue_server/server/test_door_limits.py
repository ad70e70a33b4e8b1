"""Door limits that add up (issue 16, points 8 and 9), on real processes: many hostile
connections each holding most of a big block, unauthenticated sockets that trickle to
hold every place, and what an unauthenticated connection may send before AUTH.

Each test fails on f5016ee: RSS grew by ~1 MB per hostile connection, trickling sockets
kept a legitimate client out with 503, and nothing bounded input before AUTH (the new
settings were unknown there, so a config naming them did not even start)."""
from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from hostile import rss_bytes, served, silent_socket
from polling import DEADLINE_S

from tests.conftest import HOST, QueueServer
from tests.queue_server.util import poll_until

TOKEN = "door_T0ken"
HOSTILE_CONNECTIONS = 300  # sized for CI's 2 busy cores
BLOCK_HEAD = b"PUT q 0 1048576\r\n"
HELD_BYTES = 1_000_000  # of the 1 MiB block: the block never completes
# What the server's memory may grow by under these attacks: the documented bound
# (docs/DESIGN.md "Memory at the door": 9/8 of max_input_bytes, 16 MiB here, plus ~20 KiB
# per connection) with room for the allocator; f5016ee grew by ~300 MB.
RSS_BOUND_BYTES = 48 * 1024 * 1024


def _config(*lines: str, token: bool = True) -> str:
    head = f'token = "{TOKEN}"\n' if token else ""
    return "[queue_server]\n" + head + "".join(line + "\n" for line in lines)


def _push(sock: socket.socket, data: bytes) -> None:
    """Send what the server takes of `data` within a few seconds (it may close first)."""
    sock.settimeout(5.0)
    try:
        sock.sendall(data)
    except OSError:
        pass


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def _hold_blocks(server: QueueServer, opened: list[socket.socket], *, auth: bool) -> None:
    payload = b"x" * HELD_BYTES
    for _ in range(HOSTILE_CONNECTIONS):
        sock = socket.create_connection((HOST, server.port), timeout=5.0)
        opened.append(sock)
        _push(sock, (f"AUTH {TOKEN}\r\n".encode() if auth else b"") + BLOCK_HEAD + payload)


def _settled_rss(pid: int) -> int:
    """RSS once it stops moving (the server is still reading what was sent)."""
    last = [rss_bytes(pid)]

    def steady() -> bool:
        now = rss_bytes(pid)
        same = abs(now - last[0]) < 1024 * 1024
        last[0] = now
        return same

    poll_until(steady, timeout_s=30.0, interval_s=0.5, what="RSS settled")
    return last[0]


def test_unauthenticated_connections_holding_big_blocks_stay_under_the_bound(start_queue_server,
                                                                             sockets):
    server = start_queue_server(config=_config())  # the defaults
    before = rss_bytes(server.process.pid)
    _hold_blocks(server, sockets, auth=False)
    grown = _settled_rss(server.process.pid) - before
    assert grown < RSS_BOUND_BYTES, f"RSS grew by {grown / 2**20:.0f} MiB"
    assert served(server, TOKEN)


def test_authenticated_connections_holding_big_blocks_stay_under_the_bound(start_queue_server,
                                                                           sockets):
    server = start_queue_server(config=_config("max_input_bytes = 16777216"))
    before = rss_bytes(server.process.pid)
    _hold_blocks(server, sockets, auth=True)
    grown = _settled_rss(server.process.pid) - before
    assert grown < RSS_BOUND_BYTES, f"RSS grew by {grown / 2**20:.0f} MiB"
    # A small job still goes in; a big one that does not fit is refused, clearly.
    assert served(server, TOKEN)
    late = server.connect()
    assert late.request(f"AUTH {TOKEN}".encode()) == b"200 OK"
    late.send(BLOCK_HEAD)
    late.expect(b"503 Busy Input Full\r\n")
    assert late.closed()
    assert "max_input_bytes" in server.output_text()


def test_a_held_block_is_read_once_the_holders_go(start_queue_server, sockets):
    server = start_queue_server(config=_config("max_input_bytes = 4194304", token=False))
    payload = b"x" * HELD_BYTES
    for _ in range(8):
        sock = socket.create_connection((HOST, server.port), timeout=5.0)
        sockets.append(sock)
        _push(sock, BLOCK_HEAD + payload)
    for sock in sockets:
        sock.close()
    job = b"y" * 1048576

    def put_big() -> bool:
        client = server.connect()
        try:
            client.send(BLOCK_HEAD + job)
            return client.line() == b"200 OK"
        finally:
            client.close()

    poll_until(put_big, what="a 1 MiB PUT accepted once the holders closed")


def test_trickling_unauthenticated_sockets_do_not_lock_out_a_client(start_queue_server, sockets):
    server = start_queue_server(config=_config("max_clients = 200", "idle_timeout_s = 5.0"))
    for _ in range(200):
        sock = socket.create_connection((HOST, server.port), timeout=5.0)
        sockets.append(sock)
        sock.sendall(b"P")  # a byte now and then: never idle, never a full line
    for sock in sockets[:50]:
        _push(sock, b"I")
    assert served(server, TOKEN)
    client = server.connect()
    assert client.request(f"AUTH {TOKEN}".encode()) == b"200 OK"
    assert client.request(b"PING") == b"200 PONG"
    assert "took its place" in server.output_text()


def test_an_unauthenticated_connection_is_closed_after_auth_timeout(start_queue_server):
    server = start_queue_server(config=_config("auth_timeout_s = 1.0", "idle_timeout_s = 60.0"))
    trickler = server.connect(timeout_s=15.0)
    started = time.monotonic()

    def closed_while_trickling() -> bool:
        try:
            trickler.send(b"P")
        except OSError:
            return True
        return trickler.closed(timeout_s=0.3)

    poll_until(closed_while_trickling, timeout_s=DEADLINE_S, what="the trickler closed")
    assert time.monotonic() - started >= 0.9
    assert b"401 Auth Required" in bytes(trickler.buffer)
    authenticated = server.connect(timeout_s=15.0)
    assert authenticated.request(f"AUTH {TOKEN}".encode()) == b"200 OK"
    assert not authenticated.closed(timeout_s=1.5)  # the timeout is for AUTH only
    assert authenticated.request(b"PING") == b"200 PONG"
    assert "auth_timeout_s" in server.output_text()


def test_before_auth_only_a_small_amount_may_be_sent(start_queue_server):
    server = start_queue_server(config=_config("unauthenticated_input_bytes = 1024"))
    chatty = server.connect()
    chatty.send(b"PING\r\n" * 400)  # 2,400 bytes of requests that all get 401
    assert chatty.closed()
    assert chatty.pending().count(b"401 Auth Required\r\n") <= 1024 // 6 + 1
    big = server.connect()
    big.send(b"PUT q 0 2000\r\n")
    big.expect(b"413 Job Too Large\r\n")
    assert big.closed()
    small = server.connect()
    small.send(b"PUT q 0 5\r\nhello" + f"AUTH {TOKEN}\r\n".encode() + b"PUT q 0 3000\r\n"
               + b"z" * 3000)
    small.expect(b"401 Auth Required\r\n200 OK\r\n200 OK\r\n")  # after AUTH: no such bound


def test_input_piled_behind_blocked_clients_is_bounded_in_total(start_queue_server, sockets):
    server = start_queue_server(config=_config("max_input_bytes = 1048576",
                                               "max_job_bytes = 65536", token=False))
    before = rss_bytes(server.process.pid)
    for _ in range(6):  # each blocked in GETB with 600 KB of requests behind it
        sock = socket.create_connection((HOST, server.port), timeout=5.0)
        sockets.append(sock)
        _push(sock, b"GETB q\r\n" + b"PING\r\n" * 100_000)
    poll_until(lambda: "cut:" in server.output_text(), what="the biggest holders cut")
    assert rss_bytes(server.process.pid) - before < RSS_BOUND_BYTES
    assert served(server)
    producer = server.connect()
    producer.send(b"PUT q 0 1\r\nx" * 6)
    producer.expect(b"200 OK\r\n" * 6)

    def answered(sock: socket.socket) -> bool:
        sock.settimeout(10.0)
        try:
            return sock.recv(64).startswith(b"200 OK q ")
        except OSError:
            return False

    assert any(answered(sock) for sock in sockets)  # those not cut are served in turn


def test_replies_nobody_reads_are_bounded_in_total(start_queue_server, sockets):
    server = start_queue_server("--fsync", "never", config=_config(
        "max_output_bytes = 8388608", token=False))
    filler = server.connect(timeout_s=60.0)
    filler.send(b"".join(b"PUT fill%d 0 1\r\nx" % index for index in range(10_000)))
    filler.expect(b"200 OK\r\n" * 10_000)  # STATS is now ~2.5 MB
    before = rss_bytes(server.process.pid)
    for _ in range(20):  # each asks STATS 3 times and never reads
        sock = silent_socket(server)
        sockets.append(sock)
        _push(sock, b"STATS\r\n" * 3)
    poll_until(lambda: "max_output_bytes" in server.output_text(), timeout_s=60.0,
               what="the biggest unread clients cut")
    assert rss_bytes(server.process.pid) - before < RSS_BOUND_BYTES
    assert served(server)


def test_the_unauthenticated_pool_makes_room_by_closing_its_oldest(start_queue_server):
    server = start_queue_server(config=_config("max_unauthenticated_clients = 3"))
    waiting = [server.connect() for _ in range(3)]
    assert waiting[0].request(b"PING") == b"401 Auth Required"  # in, not authenticated yet
    newer = server.connect()
    waiting[0].expect(b"503 Too Many Clients\r\n")
    assert waiting[0].closed()
    for client in (*waiting[1:], newer):  # the others keep their places
        assert client.request(f"AUTH {TOKEN}".encode()) == b"200 OK"
    more = [server.connect() for _ in range(3)]  # authenticated ones are never evicted
    assert all(client.request(b"PING") == b"200 PONG" for client in (*waiting[1:], newer))
    assert more[0].request(f"AUTH {TOKEN}".encode()) == b"200 OK"
    assert "max_unauthenticated_clients" in server.output_text()
