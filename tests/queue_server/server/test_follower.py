"""`--replica-of`: a real replica process follows a real primary, stays offline for queue
commands while it does, and serves the primary's jobs once the primary is killed."""
from __future__ import annotations

import socket
import threading

from polling import DEADLINE_S

from queue_server.client import QueueClient
from queue_server.server.join import ask_id
from tests.conftest import free_port
from tests.queue_server.util import get_job, poll_until, put_ok, runlist, total

OFFLINE = b"500 Offline Mode"


def _replica_of(start_queue_server, primary, *extra: str):  # type: ignore[no-untyped-def]
    return start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{primary.port}",
                              "--server-id", "2", *extra)


def _same_state(primary_client, replica_client) -> bool:  # type: ignore[no-untyped-def]
    return (total(primary_client) == total(replica_client)
            and runlist(primary_client) == runlist(replica_client))


def test_a_replica_follows_the_primary_and_takes_over_when_it_dies(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    producer = primary.connect()
    put_ok(producer, "q", 5, b"before the replica")
    replica = _replica_of(start_queue_server, primary, "--promote-after", "1")
    watcher = replica.connect()
    poll_until(lambda: total(watcher, "q") == (1, 1, 1, 0), timeout_s=DEADLINE_S)

    put_ok(producer, "q", 1, b"after")
    put_ok(producer, "r", 0, b"ab", "IS it")
    handed_out = get_job(producer, "GET q")
    assert handed_out.data == b"before the replica"  # the higher priority first
    poll_until(lambda: _same_state(producer, watcher), timeout_s=DEADLINE_S)
    assert total(watcher) == (2, 2, 2, 1)

    primary.kill()
    watcher.send(b"PUT z 0 1\r\nz")
    assert watcher.line() == OFFLINE  # still following: not yet promoted

    def promoted() -> bool:
        watcher.send(b"PUT z 0 1\r\nz")
        return watcher.line() == b"200 OK"

    poll_until(promoted, timeout_s=DEADLINE_S)
    job = get_job(watcher, "GET r")
    assert (job.data, job.item) == (b"ab", "it")
    assert get_job(watcher, "GET q").data == b"after"
    # the job the old primary handed out is still running here under its id
    assert handed_out.id in [running.id for running, _ in runlist(watcher)]


def test_queue_commands_on_a_following_replica_get_offline_mode(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    replica = _replica_of(start_queue_server, primary, "--promote-after", "60")
    client = replica.connect()
    poll_until(lambda: "replica of the primary" in replica.output_text(), timeout_s=DEADLINE_S)
    client.send(b"PUT q 0 3\r\nabc")
    assert client.line() == OFFLINE
    assert client.request(b"GET q") == OFFLINE
    assert client.request(b"PING").startswith(b"200")
    assert total(client) == (0, 0, 0, 0)


def test_a_replica_authenticates_with_the_cluster_token(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never", "--token", "s3cret")
    producer = primary.connect()
    assert producer.request(b"AUTH s3cret") == b"200 OK"
    put_ok(producer, "q", 0, b"guarded")
    replica = _replica_of(start_queue_server, primary, "--token", "s3cret", "--promote-after", "60")
    watcher = replica.connect()
    assert watcher.request(b"AUTH s3cret") == b"200 OK"
    poll_until(lambda: total(watcher, "q") == (1, 1, 1, 0), timeout_s=DEADLINE_S)


def test_a_replica_without_a_reachable_primary_is_promoted(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    nobody = free_port()
    replica = start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{nobody}",
                                 "--server-id", "2", "--promote-after", "0.5")
    client = replica.connect()

    def online() -> bool:
        client.send(b"PUT q 0 1\r\nx")
        return client.line() == b"200 OK"

    poll_until(online, timeout_s=DEADLINE_S)
    assert "unreachable" in replica.output_text()
    assert "primary now" in replica.output_text()


def test_the_client_library_moves_to_the_promoted_replica(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    replica = _replica_of(start_queue_server, primary, "--promote-after", "0.5")
    watcher = replica.connect()
    addresses = [f"127.0.0.1:{primary.port}", f"127.0.0.1:{replica.port}"]
    with QueueClient(addresses, reconnect_attempts=1, offline_wait_s=15) as producer:
        producer.put("q", b"acknowledged by the primary")
        assert producer.server_id == 1
        poll_until(lambda: total(watcher, "q")[2] == 1, timeout_s=DEADLINE_S)
        primary.kill()
        # One call: refused by the replica until it is promoted, then carried out there.
        producer.put("q", b"after failover")
        assert producer.server_id == 2
        jobs = producer.get("q", count=10)
        assert [job.data for job in jobs] == [b"acknowledged by the primary", b"after failover"]


def test_a_replica_that_stops_reading_is_cut_off_not_buffered_without_bound(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never", config="[queue_server]\nreplica_backlog_bytes = 1048576\n")
    stalled = primary.connect()
    stalled.send(b"SNAPSHOT 2 127.0.0.1 1\r\n")
    assert stalled.line().startswith(b"200 OK ")  # then it reads nothing more
    producer = primary.connect()
    block = b"b" * 256 * 1024

    def cut_off() -> bool:
        producer.send(b"".join(b"PUT q 0 %d\r\n" % len(block) + block for _ in range(8)))
        for _ in range(8):
            assert producer.line() == b"200 OK"
        return "must resync" in primary.output_text()

    poll_until(cut_off, timeout_s=DEADLINE_S)
    assert stalled.closed(timeout_s=30)  # what the kernel held, then EOF: let go of
    assert total(producer, "q")[2] >= 8  # and went on serving everyone else


def test_join_makes_a_returning_primary_follow_its_successor(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    first = start_queue_server("--fsync", "never")
    producer = first.connect()
    put_ok(producer, "q", 0, b"one")
    second = start_queue_server("--fsync", "never", "--join", f"127.0.0.1:{first.port}",
                                "--promote-after", "0.5")
    successor = second.connect()
    assert successor.request(b"INTERCONNECT") == b"200 OK 2"
    poll_until(lambda: total(successor, "q")[2] == 1, timeout_s=DEADLINE_S)
    first.kill()

    def promoted() -> bool:
        successor.send(b"PUT q 0 3\r\ntwo")
        return successor.line() == b"200 OK"

    poll_until(promoted, timeout_s=DEADLINE_S, interval_s=0.05)
    # The old primary comes back on its old data, told only where the cluster is.
    returned = start_queue_server("--fsync", "never", "--join", f"127.0.0.1:{second.port}",
                                  data_dir=first.data_dir)
    comeback = returned.connect()
    assert comeback.request(b"INTERCONNECT") == b"200 OK 3"
    poll_until(lambda: total(comeback, "q") == total(successor, "q") == (1, 1, 2, 0), timeout_s=DEADLINE_S)
    comeback.send(b"PUT q 0 5\r\nstale")
    assert comeback.line() == OFFLINE


def test_join_with_nobody_answering_starts_as_the_configured_primary(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    alone = start_queue_server("--fsync", "never", "--join", f"127.0.0.1:{free_port()}",
                               "--server-id", "4")
    client = alone.connect()
    assert client.request(b"INTERCONNECT") == b"200 OK 4"
    put_ok(client, "q", 0, b"served")


def test_join_does_not_take_a_stranger_for_a_queue_server() -> None:
    with socket.create_server(("127.0.0.1", 0)) as stranger:
        port = stranger.getsockname()[1]

        def answer_like_a_web_server() -> None:
            conn, _ = stranger.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        thread = threading.Thread(target=answer_like_a_web_server)
        thread.start()
        try:
            assert ask_id(("127.0.0.1", port), None) is None
        finally:
            thread.join(timeout=10)
