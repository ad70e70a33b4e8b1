"""Many queues (issue 16, point 11): STATS stays byte for byte what it was and no longer
stops the loop, its opt-in forms (`STATS q1|q2|...`, `STATS TOP n`), and drained queues
are forgotten after forget_drained_queues_s.

On f5016ee: PING waited for the whole STATS (0.6 to 2 s with 50,000 queues here), the
opt-in forms were 400, and drained queues stayed listed forever (the setting did not
exist, so a config naming it did not start)."""
from __future__ import annotations

import json
import socket
import threading
import time

from tests.conftest import HOST, QueueServer
from tests.queue_server.util import get_job, poll_until, put_ok

MANY = 50_000  # queues of one job each, as the issue measured
# The worst PING while STATS is built: 50 ms of work a turn, with slack for a machine
# running three times its cores (0.29 s seen there with 0.25), still under the whole
# STATS's 0.6 s on a quiet machine.
PING_BOUND_S = 0.5


def _fill(server: QueueServer, queues: int) -> None:
    client = server.connect(timeout_s=60.0)
    client.send(b"".join(b"PUT m%d 0 1\r\nx" % index for index in range(queues)))
    client.expect(b"200 OK\r\n" * queues)
    client.close()


def _read_sized(sock: socket.socket) -> bytes:
    reader = sock.makefile("rb")
    head = reader.readline()
    assert head.startswith(b"200 OK "), head
    return reader.read(int(head.split()[2]))


def test_ping_is_answered_while_a_big_stats_is_built(start_queue_server):
    server = start_queue_server("--fsync", "never")
    _fill(server, MANY)
    pinger = server.connect(timeout_s=30.0)
    assert pinger.request(b"PING") == b"200 PONG"
    asker = socket.create_connection((HOST, server.port), timeout=60.0)
    replies: list[bytes] = []

    def ask() -> None:
        for _ in range(3):
            asker.sendall(b"STATS\r\n")
            replies.append(_read_sized(asker))

    thread = threading.Thread(target=ask)
    thread.start()
    worst = 0.0
    while thread.is_alive():
        started = time.perf_counter()
        assert pinger.request(b"PING") == b"200 PONG"
        worst = max(worst, time.perf_counter() - started)
    thread.join()
    asker.close()
    assert len(replies) == 3 and all(len(json.loads(body)) == MANY for body in replies)
    assert worst < PING_BOUND_S, f"a PING waited {worst * 1000:.0f} ms behind STATS"


def test_stats_opt_in_forms_answer_a_few_queues(start_queue_server):
    server = start_queue_server("--fsync", "never")
    _fill(server, 3000)
    client = server.connect()
    put_ok(client, "m7", 0, b"y")
    client.send(b"STATS m1|m7|nosuch\r\n")
    named = json.loads(client.exact(int(client.line().split()[2])))
    assert sorted(named) == ["m1", "m7", "nosuch"] and named["m7"]["ready"] == 2
    client.send(b"STATS TOP 1\r\nPING\r\n")  # built over turns; the PING waits its turn
    top = json.loads(client.exact(int(client.line().split()[2])))
    assert list(top) == ["m7", "*"] and top["*"]["queues"] == 2999 and top["*"]["ready"] == 2999
    assert client.line() == b"200 PONG"
    client.send(b"STATS TOP 0\r\n")
    assert client.line().startswith(b"400 Bad Request")


def test_drained_queues_are_forgotten_after_the_setting(start_queue_server):
    # Finished jobs kept hold their queue (keep_done_s): none are kept here.
    server = start_queue_server(config="[queue_server]\nforget_drained_queues_s = 1.0\nkeep_done_total_max = 0\n")
    client = server.connect(timeout_s=15.0)
    for index in range(50):
        put_ok(client, f"gone{index}", 0, b"x")
        job = get_job(client, f"GET gone{index}")
        client.send(b"DONE %d\r\n" % job.id)
        assert client.line().startswith(b"200 OK")
    put_ok(client, "kept", 0, b"x")  # a job waits
    put_ok(client, "dies", 0, b"x")
    job = get_job(client, "GET dies")
    client.send(b"FAIL %d DEAD 4\r\nboom" % job.id)
    assert client.line().startswith(b"200 OK")
    waiter = server.connect(timeout_s=60.0)
    waiter.send(b"GETB waited\r\n")  # a client waits on it by name
    put_ok(client, "waited", 0, b"x")
    assert waiter.line().startswith(b"200 OK waited")
    waiter.send(b"GETB waited\r\n")

    def listed() -> list[str]:
        client.send(b"STATS\r\n")
        return sorted(json.loads(client.exact(int(client.line().split()[2]))))

    assert len(listed()) == 53
    poll_until(lambda: listed() == ["dies", "kept", "waited"], timeout_s=30.0,
               what="the 50 drained queues forgotten")
    started = time.monotonic()
    while time.monotonic() - started < 2.0:  # the others stay
        assert listed() == ["dies", "kept", "waited"]
        time.sleep(0.2)
    put_ok(client, "gone3", 0, b"back")  # a forgotten queue comes back with its next job
    client.send(b"STATS gone3\r\n")
    back = json.loads(client.exact(int(client.line().split()[2])))
    assert back["gone3"]["ready"] == 1 and back["gone3"]["put"] == 1
