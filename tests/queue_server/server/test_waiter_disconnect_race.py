"""A blocked client that closes just before a job arrives must not receive it, even when
the server sees the job before it has processed the close."""
from __future__ import annotations

import socket


def test_a_job_put_right_after_a_blocked_client_closed_stays_queued(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = start_queue_server("--fsync", "never")
    producer = server.connect()
    lost = 0
    for _ in range(40):
        waiter = socket.create_connection((server.host, server.port), timeout=5)
        waiter.sendall(b"PING\r\nGETB r\r\n")  # one segment: the PONG proves the GETB is blocked
        assert waiter.recv(64) == b"200 PONG\r\n"
        waiter.close()
        producer.send(b"PUT r 0 1\r\nx")
        producer.expect(b"200 OK\r\n")
        total = producer.request(b"TOTAL r")
        lost += total != b"200 OK 1 1 1 0"
        producer.send(b"GET r\r\n")
        reply = producer.line()
        producer.exact(1)
        producer.send(b"DONE " + reply.split()[3] + b"\r\n")
        producer.expect(b"200 OK FINQ\r\n")
    assert lost == 0
