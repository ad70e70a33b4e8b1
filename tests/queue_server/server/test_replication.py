"""SNAPSHOT <n> <ip> <port> turns a connection into a replication link: a replica fed the
snapshot (CLONE) and then the streamed SYNC records holds the primary's state."""
from __future__ import annotations

from tests.queue_server.util import poll_until


def _read_snapshot(link) -> bytes:  # type: ignore[no-untyped-def]
    head = link.line()
    assert head.startswith(b"200 OK ")
    return link.exact(int(head.split()[2]))


def test_a_replica_fed_snapshot_and_stream_matches_the_primary(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    replica = start_queue_server("--fsync", "never")
    producer = primary.connect()
    producer.send(b"PUT q 5 3\r\nold")
    producer.expect(b"200 OK\r\n")

    link = primary.connect()
    link.send(b"SNAPSHOT 2 127.0.0.1 7401\r\n")
    blob = _read_snapshot(link)
    feeder = replica.connect()
    feeder.send(b"CLONE %d\r\n" % len(blob) + blob)
    feeder.expect(b"200 OK\r\n")

    producer.send(b"PUT q 1 3\r\nnewPUT r 0 2 IS it\r\nabGET q\r\n")
    producer.expect(b"200 OK\r\n200 OK\r\n")
    handed_out = producer.line()
    producer.exact(3)
    job_id = handed_out.split()[3]
    producer.send(b"DONE " + job_id + b"\r\n")
    producer.expect(b"200 OK\r\n")

    stream = bytearray()

    def stream_has_the_done() -> bool:
        stream.extend(link.pending())
        return b"SYNC DONE " + job_id in stream

    poll_until(stream_has_the_done, what="the DONE streamed to the link")
    assert stream.startswith(b"SYNC PUT q 1 3\r\nnew")
    feeder.send(bytes(stream))
    assert [feeder.line() for _ in range(4)] == [b"200 OK"] * 4  # PUT, PUT, GET, DONE
    for request in (b"TOTAL", b"TOTAL q", b"TOTAL r"):
        assert replica.connect().request(request) == primary.connect().request(request)
    follower, leader = replica.connect(), primary.connect()
    for client in (follower, leader):
        client.send(b"GET q\r\n")
    assert follower.line().split()[:3] == leader.line().split()[:3]  # the same job comes next
