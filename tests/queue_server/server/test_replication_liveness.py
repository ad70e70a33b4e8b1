"""Heartbeats both ways on the replication link (issue 17, B): a frozen primary is noticed
by its replica, and a frozen replica by its primary, within seconds, although TCP stays
open. Before them, a replica waited for the frozen primary's socket to close (never, while
it stays frozen). Real processes, SIGSTOP for the freeze."""
from __future__ import annotations

import time

from polling import DEADLINE_S

from tests.queue_server.server.ha import frozen, role
from tests.queue_server.util import poll_until, put_ok

PROMOTE_AFTER_S = 2.0
# The liveness limit is 1.5 s; a busy CI machine gets ample slack on top.
NOTICED_WITHIN_S = 12.0


def test_a_frozen_primary_is_replaced_although_its_socket_stays_open(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    replica = start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{primary.port}",
                                 "--server-id", "2", "--promote-after", str(PROMOTE_AFTER_S))
    producer = primary.connect()
    watcher = replica.connect()
    put_ok(producer, "q", 0, b"before the freeze")
    poll_until(lambda: role(producer)[2] == b"1", timeout_s=DEADLINE_S, what="the replica streaming")
    with frozen(primary):
        started = time.monotonic()

        def promoted() -> bool:
            watcher.send(b"PUT z 0 1\r\nz")
            return watcher.line() == b"200 OK"

        poll_until(promoted, timeout_s=NOTICED_WITHIN_S + PROMOTE_AFTER_S,
                   what="the replica taking over from its frozen primary")
        took_s = time.monotonic() - started
    assert "the primary sent nothing for" in replica.log_text()
    assert took_s < NOTICED_WITHIN_S + PROMOTE_AFTER_S
    assert role(watcher)[0] == b"primary"


def test_a_frozen_replica_is_cut_off_by_its_primary(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server("--fsync", "never")
    replica = start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{primary.port}",
                                 "--server-id", "2", "--promote-after", "600")
    client = primary.connect()
    poll_until(lambda: role(client)[2] == b"1", timeout_s=DEADLINE_S, what="the replica's heartbeats")
    with frozen(replica):
        poll_until(lambda: role(client)[2] == b"0", timeout_s=NOTICED_WITHIN_S,
                   what="the primary cutting its frozen replica off")
    assert "the replica sent nothing for" in primary.log_text()
    # Thawed, it reconnects, resyncs and sends heartbeats again.
    poll_until(lambda: role(client)[2] == b"1", timeout_s=DEADLINE_S, what="the thawed replica back")
    put_ok(client, "q", 0, b"after")
