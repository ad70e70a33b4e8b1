"""A slot's client that meets a server which is no longer the primary (issue 25, 1): three
real queue servers in sync mode under a real manager (the sentinel). The primary, with a
slot's connection open to it, is frozen until a replica is promoted, then thawed and told
to follow. A refusal (`500 Offline Mode`) must send the client to the new primary, never
keep it on the deposed one (on 29606e0 the connection was kept: a slot asked the same
server every 5 s for minutes while its jobs waited on the new primary)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from queue_server.client import QueueClient
from queue_server.protocol.client_errors import OfflineError
from slot.source import ClientSource
from slot.wake import Waker
from tests.queue_server.server.ha import cluster_database, frozen, role
from tests.queue_server.server.ha_cluster import (
    FAILOVER_DEADLINE_S,
    REPLY_TIMEOUT_S,
    HaCluster,
    managed_cluster,
)
from tests.queue_server.util import poll_until


@pytest.fixture
def ha(tmp_path: Path, start_queue_server) -> Iterator[HaCluster]:  # type: ignore[no-untyped-def]
    with cluster_database(tmp_path) as url, managed_cluster(tmp_path, url, start_queue_server) as cluster:
        yield cluster


def test_a_refusal_by_a_deposed_primary_sends_the_slot_to_the_new_one(ha: HaCluster) -> None:
    first = ha.servers[0]
    with QueueClient(ha.addresses, timeout_s=REPLY_TIMEOUT_S) as slot_client, \
            QueueClient(ha.addresses, timeout_s=REPLY_TIMEOUT_S) as plain:
        slot_client.ping()
        plain.ping()
        assert slot_client.address == plain.address == ("127.0.0.1", first.port)
        with frozen(first):  # both connections stay open to it
            new = poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                             what=lambda: f"a replica promoted: {ha.views()}")
        poll_until(lambda: role(first.connect(timeout_s=REPLY_TIMEOUT_S))[0] == b"replica",
                   timeout_s=FAILOVER_DEADLINE_S, what=lambda: f"the thawed one follows: {ha.views()}")
        with QueueClient(new.address, timeout_s=REPLY_TIMEOUT_S) as producer:
            producer.put("q", b"one", key="after-1")
            producer.put("q", b"two", key="after-2")

        # The slot's fetch follows the primary at once: no error, no 5 s retry.
        jobs = ClientSource(slot_client, Waker()).fetch("q", count=1, lock_s=30.0)
        assert jobs is not None and [job.key for job in jobs] == ["after-1"]
        assert slot_client.address == ("127.0.0.1", new.port)

        # A client told nothing more: the refusal is raised, but never met twice.
        with pytest.raises(OfflineError):
            plain.get("q")
        assert [job.key for job in plain.get("q", keys=True)] == ["after-2"]
        assert plain.address == ("127.0.0.1", new.port)
