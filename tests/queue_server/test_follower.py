"""`--replica-of`: a real replica process follows a real primary, stays offline for queue
commands while it does, and serves the primary's jobs once the primary is killed."""
from __future__ import annotations

from util import get_job, poll_until, put_ok, runlist, total

from queue_server.client import QueueClient
from queue_server.client_errors import ConnectionLost, OfflineError
from tests.conftest import free_port

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
    poll_until(lambda: total(watcher, "q") == (1, 1, 1, 0), timeout_s=10)

    put_ok(producer, "q", 1, b"after")
    put_ok(producer, "r", 0, b"ab", "IS it")
    handed_out = get_job(producer, "GET q")
    assert handed_out.data == b"before the replica"  # the higher priority first
    poll_until(lambda: _same_state(producer, watcher), timeout_s=10)
    assert total(watcher) == (2, 2, 2, 1)

    primary.kill()
    watcher.send(b"PUT z 0 1\r\nz")
    assert watcher.line() == OFFLINE  # still following: not yet promoted

    def promoted() -> bool:
        watcher.send(b"PUT z 0 1\r\nz")
        return watcher.line() == b"200 OK"

    poll_until(promoted, timeout_s=15)
    job = get_job(watcher, "GET r")
    assert (job.data, job.item) == (b"ab", "it")
    assert get_job(watcher, "GET q").data == b"after"
    # the job the old primary handed out is still running here under its id
    assert handed_out.id in [running.id for running, _ in runlist(watcher)]


def test_queue_commands_on_a_following_replica_get_offline_mode(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    replica = _replica_of(start_queue_server, primary, "--promote-after", "60")
    client = replica.connect()
    poll_until(lambda: "replica of the primary" in replica.output_text(), timeout_s=10)
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
    poll_until(lambda: total(watcher, "q") == (1, 1, 1, 0), timeout_s=10)


def test_a_replica_without_a_reachable_primary_is_promoted(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    nobody = free_port()
    replica = start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{nobody}",
                                 "--server-id", "2", "--promote-after", "0.5")
    client = replica.connect()

    def online() -> bool:
        client.send(b"PUT q 0 1\r\nx")
        return client.line() == b"200 OK"

    poll_until(online, timeout_s=10)
    assert "unreachable" in replica.output_text()
    assert "primary now" in replica.output_text()


def test_the_client_library_moves_to_the_promoted_replica(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    replica = _replica_of(start_queue_server, primary, "--promote-after", "0.5")
    watcher = replica.connect()
    addresses = [f"127.0.0.1:{primary.port}", f"127.0.0.1:{replica.port}"]
    with QueueClient(addresses, reconnect_attempts=1) as producer:
        producer.put("q", b"acknowledged by the primary")
        assert producer.server_id == 1
        poll_until(lambda: total(watcher, "q")[2] == 1, timeout_s=10)
        primary.kill()

        def put_accepted() -> bool:
            try:
                producer.put("q", b"after failover")
            except (OfflineError, ConnectionLost):
                return False  # the primary is gone, the replica not promoted yet
            return True

        poll_until(put_accepted, timeout_s=15, interval_s=0.05)
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

    poll_until(cut_off, timeout_s=20)
    assert stalled.closed(timeout_s=30)  # what the kernel held, then EOF: let go of
    assert total(producer, "q")[2] >= 8  # and went on serving everyone else
