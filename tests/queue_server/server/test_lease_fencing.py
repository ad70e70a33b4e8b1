"""A lease id names one hand-out in the cluster's whole history, and only the primary hands
out jobs (issue 25, points 2 and 3; audit door 1 "a deposed primary hands out a job").

Real queue servers: a managed server told to FOLLOW another answers its blocked GETB at
once and never serves it from the records it applies; ids of two epochs never meet, so a
stale DONE meets 404 on the other server; a restart whose log lost its last hand-out (as
a power loss drops an unsynced tail) does not give that id again. The whole door with a
real manager as sentinel is in test_lease_fencing_failover.py.
"""
from __future__ import annotations

import os
from pathlib import Path

from tests.queue_server.util import barrier, get_job, poll_until, put_ok, total

EPOCH_ERAS_IDS = 10**13  # lease_ids.py: ERA_IDS * EPOCH_ERAS ids per epoch


def lease(server, epoch: int, ms: int = 600_000) -> None:  # type: ignore[no-untyped-def]
    """Lease `server` for `ms` in `epoch`, as the manager does (twice the first time: the
    grant runs from this server's own clock, echoed)."""
    conn = server.connect()
    reply = conn.request(b"LEASE %d 600000 0" % epoch)
    assert reply.startswith(b"200 OK "), reply
    clock = int(reply.split()[2])
    assert conn.request(b"LEASE %d %d %d" % (epoch, ms, clock)).startswith(b"200 OK "), "lease"
    poll_until(lambda: conn.request(b"PUT probe 0 0").startswith(b"200 OK"), what="leased")
    assert get_job(conn, "GET probe").queue == "probe"  # (drained again: nothing else there)


def answer_of_blocked(conn) -> bytes:  # type: ignore[no-untyped-def]
    """What a blocked client got by now: its reply, or b"" and EOF if it was cut."""
    got = b""

    def answered() -> bool:
        nonlocal got
        got += conn.pending(0.05)
        return bool(got) or conn.eof

    poll_until(answered, what="the blocked client answered or cut")
    return got


def test_a_server_told_to_follow_answers_its_blocked_getb_and_hands_out_nothing_after(
        start_queue_server) -> None:
    old, new = start_queue_server("--managed"), start_queue_server("--managed")
    lease(old, 1)
    lease(new, 2)
    admin = old.connect()
    put_ok(admin, "pre", 0, b"pre")
    stale = get_job(admin, "GET pre").id  # the old primary's last hand-out, never replicated
    waiter = old.connect()
    waiter.send(b"GETB work\r\n")
    barrier(admin)
    assert waiter.pending() == b""
    assert admin.request(f"FOLLOW {new.address} 2".encode()) == b"200 OK"
    # Answered at once, before any job reaches it as a replica's applied record.
    assert answer_of_blocked(waiter) in (b"", b"500 Offline Mode\r\n")
    producer = new.connect()
    for data in (b"job0", b"job1", b"hi"):
        put_ok(producer, "work", 0, data)
    poll_until(lambda: total(old.connect(), "work") == (1, 1, 3, 0),
               what="the three jobs applied on the old primary, now a replica")
    assert waiter.pending(0.2) in (b"", b"500 Offline Mode\r\n"), "a replica handed out a job"
    assert total(producer, "work") == (1, 1, 3, 0), "nothing handed out on the new primary either"
    # Ids of two epochs never meet: the old primary's id is no id of the new one.
    consumer = new.connect()
    job = get_job(consumer, "GET work")
    assert job.id >= 2 * EPOCH_ERAS_IDS and job.id != stale
    assert consumer.request(b"DONE %d" % stale) == b"404 Job Not Found"
    assert consumer.request(b"DONE %d" % (stale + 1)) == b"404 Job Not Found"
    assert total(consumer, "work") == (1, 1, 2, 1), "a stale DONE deleted a job"
    assert consumer.request(b"DONE %d" % job.id) == b"200 OK"


def test_a_primary_whose_lease_lapses_answers_its_blocked_clients(start_queue_server) -> None:
    server = start_queue_server("--managed")
    admin = server.connect()
    lease(server, 1, ms=5000)  # 5 s from the grant on this server's clock, not renewed
    waiter = server.connect()
    waiter.send(b"GETB work\r\n")
    barrier(admin)
    assert waiter.pending() == b"", "refused before the lease lapsed: the test proves nothing"
    assert answer_of_blocked(waiter) in (b"", b"500 Offline Mode\r\n")
    assert admin.request(b"PUT work 0 0") == b"500 Offline Mode"


def _frame_starts(log: Path) -> list[int]:
    """Where each group-commit frame (`#<len> <crc>\\n<chunk>`) of a log starts."""
    data = log.read_bytes()
    starts, at = [], 0
    while at < len(data) and data[at:at + 1] == b"#":
        header_end = data.index(b"\n", at)
        starts.append(at)
        at = header_end + 1 + int(data[at + 1:header_end].split()[0])
    return starts


def test_a_restart_never_gives_an_id_its_log_lost_again(start_queue_server) -> None:
    server = start_queue_server("--fsync", "never")
    conn = server.connect()
    put_ok(conn, "q", 0, b"first")
    put_ok(conn, "q", 0, b"second")
    handed = get_job(conn, "GET q")
    server.kill()
    # A power loss drops the unsynced tail: here the frame of the hand-out.
    (log,) = sorted(server.data_dir.glob("log-*.log"))
    starts = _frame_starts(log)
    assert len(starts) == 3, starts  # the two PUTs, the GET
    os.truncate(log, starts[-1])
    again = start_queue_server("--fsync", "never", data_dir=server.data_dir)
    conn = again.connect()
    assert total(conn, "q") == (1, 1, 2, 0)
    job = get_job(conn, "GET q")
    assert job.data == handed.data and job.id > handed.id
    assert conn.request(b"DONE %d" % handed.id) == b"404 Job Not Found"
    assert total(conn, "q") == (1, 1, 1, 1), "the stale DONE deleted the new hand-out"
    assert "lease ids go on from" in again.log_text()
