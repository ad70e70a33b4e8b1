"""A replica's lag in records (issue 17, 7): the primary counts the records it wrote less
the position each replica's last REPLACK confirmed, and shows it in REPLICAS, INFO, the
dashboard's reading and /metrics. A replica frozen with SIGSTOP falls behind by what was
written meanwhile; thawed, it is back to 0. Real processes."""
from __future__ import annotations

import json

from admin_ui.queue_roles import QueueServerRole, read_role, role_families
from tests.queue_server.server.ha import frozen
from tests.queue_server.util import poll_until

PUTS = 50
LINK_S = 30.0  # generous: a busy CI machine
# The primary cuts a replica silent for 1.5 s (liveness): on a very busy machine the
# frozen replica's lag may be read too late, and the freeze is tried again once relinked.
ATTEMPTS = 3


def _caught_up(primary) -> bool:  # type: ignore[no-untyped-def]
    lags = read_role(primary.address, None).replicas
    return [(lag.behind_records, lag.behind_bytes) for lag in lags] == [(0, 0)]


def _lag_while_frozen(primary, replica) -> QueueServerRole:  # type: ignore[no-untyped-def]
    conn = primary.connect()
    for _ in range(ATTEMPTS):
        with frozen(replica):
            conn.send(b"".join(b"PUT lag 0 1\r\nx" for _ in range(PUTS)))
            for _ in range(PUTS):
                assert conn.line() == b"200 OK"
            seen = read_role(primary.address, None)
        if seen.replicas and seen.replicas[0].behind_records is not None:
            return seen
        poll_until(lambda: _caught_up(primary), timeout_s=LINK_S, what="the replica relinked")
    raise AssertionError(f"the frozen replica's lag was never read before its link was cut: {seen}")


def _info_replicas(primary) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    conn = primary.connect()
    conn.send(b"INFO\r\n")
    words = conn.line().split()
    assert words[:2] == [b"200", b"OK"], words
    replicas: list[dict[str, object]] = json.loads(conn.exact(int(words[2])))["replicas"]
    return replicas


def test_a_frozen_replica_lags_by_the_records_written_and_is_back_to_zero_once_thawed(start_queue_server) -> None:  # type: ignore[no-untyped-def]
    primary = start_queue_server()
    replica = start_queue_server("--replica-of", f"127.0.0.1:{primary.port}", "--server-id", "2",
                                 "--promote-after", "600")
    poll_until(lambda: _caught_up(primary), timeout_s=LINK_S, what="the replica linked")
    seen = _lag_while_frozen(primary, replica)
    lag = seen.replicas[0]
    assert lag.behind_records == PUTS and lag.behind_bytes > 0, lag
    families = {family.name: family for family in role_families([seen])}
    assert [s.value for s in families["slotmap_queue_replica_lag_records"].samples] == [float(PUTS)]
    poll_until(lambda: _caught_up(primary), timeout_s=LINK_S, what="the thawed replica caught up")
    [info] = _info_replicas(primary)
    assert (info["replica"], info["behind_records"], info["behind_bytes"]) == (
        f"127.0.0.1:{replica.port}", 0, 0)
