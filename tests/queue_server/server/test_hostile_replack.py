"""A replica's `REPLACK <bytes> <records>` as a broken or hostile peer may send it
(PROTOCOL.md Part B): both numbers go through numbers.py's bounds, and one that is garbled,
negative, huge, not an integer, or claims more than the primary streamed or wrote gets the
link cut with the reason in the primary's log, never a reply inside the stream, a lag of 0
the replica does not have, or (sync mode) a reply released before the replica holds its
records. A REPLACK from a client that is no replica gets a 400. A real queue server; the
test plays the replica on a raw connection."""
from __future__ import annotations

import pytest

from tests.conftest import QueueServer, RawClient, StartServer
from tests.queue_server.server.ha import role
from tests.queue_server.util import poll_until, put_ok

PUTS = 3
LINK_S = 30.0  # generous: a busy 2-core machine
INT64_MAX = 2**63 - 1


class FakeReplica:
    """ROLE (the primary's position), SNAPSHOT, the snapshot read: then the stream."""

    def __init__(self, primary: QueueServer) -> None:
        self.link = primary.connect()
        self.link.send(b"ROLE\r\nSNAPSHOT 2 127.0.0.1 7401\r\n")
        self.position = int(self.link.line().split()[9])
        head = self.link.line().split()
        assert head[:2] == [b"200", b"OK"], head
        self.link.exact(int(head[2]))
        self.stream = bytearray()  # everything received after the snapshot

    def read(self) -> bytes:
        self.stream += self.link.pending()
        return bytes(self.stream)

    def ack(self, confirmed_bytes: int, records: int) -> None:
        self.link.send(b"REPLACK %d %d\r\n" % (confirmed_bytes, records))


def _replicas(client: RawClient) -> list[tuple[int, int]]:
    """REPLICAS: (bytes behind, records behind) per link."""
    client.send(b"REPLICAS\r\n")
    count = int(client.line().split()[2])
    lines = [client.line().split() for _ in range(count)]
    return [(int(words[1]), int(words[3])) for words in lines]


def _streamed_puts(primary: QueueServer) -> tuple[FakeReplica, RawClient]:
    replica = FakeReplica(primary)
    client = primary.connect()
    for n in range(PUTS):
        put_ok(client, "q", 0, b"job-%d" % n)
    poll_until(lambda: replica.read().count(b"SYNC PUT q ") == PUTS, timeout_s=LINK_S,
               what="the PUTs streamed to the link")
    return replica, client


def test_honest_replacks_give_the_lag_in_bytes_and_records(start_queue_server: StartServer) -> None:
    primary = start_queue_server()
    replica, client = _streamed_puts(primary)
    streamed = len(replica.stream)

    def behind_all() -> bool:  # re-sent each time: the primary cuts a link silent for 1.5 s
        replica.ack(0, replica.position)
        return [records for _, records in _replicas(client)] == [PUTS]

    poll_until(behind_all, timeout_s=LINK_S, what="the link's lag at its snapshot")
    [(behind_bytes, _)] = _replicas(client)
    assert behind_bytes >= streamed

    def caught_up() -> bool:
        replica.ack(len(replica.read()), replica.position + PUTS)
        return _replicas(client) == [(0, 0)]

    poll_until(caught_up, timeout_s=LINK_S, what="the link caught up")
    assert role(client)[2] == b"1"


def _beyond_records(replica: FakeReplica) -> bytes:
    return b"REPLACK %d %d" % (len(replica.stream), replica.position + PUTS + 1)


def _beyond_bytes(replica: FakeReplica) -> bytes:
    return b"REPLACK %d %d" % (len(replica.stream) + 10**6, replica.position + PUTS)


def _int64_records(replica: FakeReplica) -> bytes:
    return b"REPLACK %d %d" % (len(replica.stream), INT64_MAX)


HOSTILE = {
    "records past those written": (_beyond_records, "records written here"),
    "bytes past those streamed": (_beyond_bytes, "were streamed to it"),
    "records at the int64 bound": (_int64_records, "records written here"),
    "records over int64": (lambda _: b"REPLACK 0 %d" % (INT64_MAX + 1),
                           "record count must be 0..9223372036854775807"),
    "5000 digits": (lambda _: b"REPLACK " + b"9" * 5000, "byte count must be 0..9223372036854775807"),
    "negative bytes": (lambda _: b"REPLACK -1 0", "bad byte count"),
    "negative records": (lambda _: b"REPLACK 0 -5", "bad record count"),
    "a fraction": (lambda _: b"REPLACK 1.5 2", "bad byte count"),
    "an exponent": (lambda _: b"REPLACK 0 1e3", "bad record count"),
    "no number": (lambda _: b"REPLACK", "REPLACK <bytes> [<records>] expected"),
    "three numbers": (lambda _: b"REPLACK 1 2 3", "REPLACK <bytes> [<records>] expected"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_garbled_or_impossible_replack_cuts_the_link_and_leaves_no_lag_figure(
        start_queue_server: StartServer, case: str) -> None:
    make, reason = HOSTILE[case]
    primary = start_queue_server()
    replica, client = _streamed_puts(primary)

    def has_a_figure() -> bool:  # an honest REPLACK first (re-sent: liveness)
        replica.ack(0, replica.position)
        return [records for _, records in _replicas(client)] == [PUTS]

    poll_until(has_a_figure, timeout_s=LINK_S, what="the link's first REPLACK")
    before = len(replica.read())
    replica.link.send(make(replica) + b"\r\n")
    assert replica.link.closed(timeout_s=LINK_S), case
    assert b"400 " not in replica.read()[before:], "a reply inside the replication stream"
    log = primary.output_text()
    assert "cut (" in log and reason in log, log[-2000:]
    assert _replicas(client) == []  # no figure left for a link that is gone
    assert role(client)[2] == b"0"
    put_ok(client, "q", 0, b"served on")


def test_a_replack_from_a_client_is_refused_and_counts_as_no_replica(queue_server: QueueServer) -> None:
    client = queue_server.connect()
    assert client.request(b"REPLACK 0 0") == b"400 Bad Request: REPLACK only on a replication link"
    assert role(client)[2] == b"0"
    assert _replicas(client) == []


def test_in_sync_mode_a_replack_past_the_stream_releases_no_reply(start_queue_server: StartServer) -> None:
    # The timeout is never reached in the test: a reply released could only be the REPLACK's.
    primary = start_queue_server("--replicate", "sync", "--sync-timeout", "600")
    replica = FakeReplica(primary)
    client = primary.connect()
    client.send(b"PUT q 0 4\r\nheld")
    poll_until(lambda: b"SYNC PUT q " in replica.read(), timeout_s=LINK_S, what="the PUT streamed")
    replica.ack(len(replica.stream) + 10**6, replica.position + 1)
    assert replica.link.closed(timeout_s=LINK_S)
    # The cut and any release happen in the REPLACK's loop turn: a released reply is on
    # the client's socket by the time the link is seen closed.
    assert client.pending(wait_s=0.5) == b"", "acknowledged before any replica held the PUT"
    assert "only" in primary.output_text() and "were streamed to it" in primary.output_text()
