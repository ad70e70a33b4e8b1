"""Replies a client does not read are bounded per connection (Redis's client-output-buffer-limit):
past output_soft_limit_bytes its requests are not read until its replies drain, past
output_hard_limit_bytes it is cut off; other clients are served meanwhile."""
from __future__ import annotations

import json
import time

from hostile import RSS_MARGIN_BYTES, rss_bytes, served, silent_socket

from tests.conftest import QueueServer, RawClient
from tests.queue_server.util import poll_until

QUEUES = 1000
PIPELINED_STATS = 5000
WATCH_S = 4.0
# How long a second client may wait for its PING while the attacker's replies pile up. Without
# the soft limit the server answers the 5,000 pipelined STATS first: the PING waited 46 s on a
# quiet machine; the 2 s bound this was could be missed by a healthy server left unscheduled
# on a busy shared 2-core machine.
SERVED_WITHIN_S = 10.0


def _fill_queues(server: QueueServer, count: int) -> None:
    client = server.connect()
    client.send(b"".join(b"PUT queue_%d 0 1\r\nx" % i for i in range(count)))
    client.expect(b"200 OK\r\n" * count)


def _stats_reply_bytes(server: QueueServer) -> int:
    client = server.connect()
    head = client.request(b"STATS")
    length = int(head.split()[-1])
    client.exact(length)
    return len(head) + 2 + length


def test_pipelined_stats_never_read_keep_memory_bounded_and_others_served(start_queue_server):
    server = start_queue_server()
    _fill_queues(server, QUEUES)
    reply_bytes = _stats_reply_bytes(server)
    assert reply_bytes * PIPELINED_STATS > 10 * RSS_MARGIN_BYTES  # unbounded, this would show
    before = rss_bytes(server.process.pid)
    attacker = silent_socket(server)
    try:
        attacker.sendall(b"STATS\r\n" * PIPELINED_STATS)
        peak = before
        deadline = time.monotonic() + WATCH_S
        while time.monotonic() < deadline:
            started = time.monotonic()
            assert served(server, timeout_s=SERVED_WITHIN_S)
            assert time.monotonic() - started < SERVED_WITHIN_S, "a second client waited behind the attacker"
            peak = max(peak, rss_bytes(server.process.pid))
            time.sleep(0.1)
        assert peak < before + RSS_MARGIN_BYTES, f"RSS went from {before} to {peak}"
    finally:
        attacker.close()
    assert server.is_running()
    assert served(server)


def test_a_pipelining_client_that_reads_late_still_gets_every_reply_in_order(start_queue_server):
    server = start_queue_server()
    _fill_queues(server, QUEUES)
    count = 8 * 1024 * 1024 // _stats_reply_bytes(server)  # 8 x output_soft_limit_bytes
    client = RawClient(server.host, server.port, timeout_s=30.0)
    client.send(b"STATS\r\nPING\r\n" * count)
    time.sleep(0.5)  # nothing read meanwhile: the server must hold, not drop
    for _ in range(count):
        head = client.line()
        assert head.startswith(b"200 OK ")
        assert len(json.loads(client.exact(int(head.split()[-1])))) == QUEUES
        assert client.line() == b"200 PONG"
    client.close()


def test_a_reply_over_the_hard_limit_disconnects_that_client_only(start_queue_server):
    server = start_queue_server(config="[queue_server]\noutput_soft_limit_bytes = 1024\n"
                                       "output_hard_limit_bytes = 65536\n")
    _fill_queues(server, QUEUES)
    client = server.connect()
    client.send(b"STATS\r\n")
    assert client.closed()
    poll_until(lambda: "output_hard_limit_bytes" in server.output_text(), what="the cut logged")
    small = server.connect()
    assert small.request(b"TOTAL queue_1") == b"200 OK 1 1 1 0"
    assert served(server)
