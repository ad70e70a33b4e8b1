"""The slot map page and /api/queue-servers show the queue servers (issue 17): a real
primary with a real replica, and an address where nothing listens."""
from __future__ import annotations

from admin_testing import TestClient

from tests.queue_server.server.ha import role
from tests.queue_server.util import poll_until


def test_the_page_and_the_api_show_primary_replica_and_the_unreachable_one(  # type: ignore[no-untyped-def]
    make_client, start_queue_server,
) -> None:
    primary = start_queue_server("--fsync", "never")
    replica = start_queue_server("--fsync", "never", "--replica-of", primary.address,
                                 "--server-id", "2", "--promote-after", "600")
    poll_until(lambda: role(primary.connect())[2] == b"1", timeout_s=30, what="the replica linked")
    client: TestClient = make_client(queue_servers=(primary.address, replica.address, "127.0.0.1:1"))
    servers = client.get("/api/queue-servers").json()
    assert [(s["role"], s["reachable"]) for s in servers] == [
        ("primary", True), ("replica", True), (None, False)]
    assert servers[0]["replicas"][0]["replica"] == f"127.0.0.1:{replica.port}"
    html = client.get("/slotmap").text
    assert 'id="queue-servers"' in html and "unreachable" in html
    assert f"127.0.0.1:{replica.port} (" in html
    # The Queues and Busy pages say which is the primary too (Busy reads the running jobs).
    for page in ("/queues", "/busy"):
        html = client.get(page).text
        assert 'id="queue-server-roles"' in html, page
        for server, shown in ((primary.address, "primary"), (replica.address, "replica"),
                              ("127.0.0.1:1", "unreachable")):
            assert f'data-server="{server}" data-role="{shown}"' in html, (page, server)


def test_servers_waiting_for_different_confirmations_are_marked(  # type: ignore[no-untyped-def]
    make_client, start_queue_server,
) -> None:
    """A primary in sync mode (min_sync_replicas 2, its config) with a replica started
    async: each says what it enforces in ROLE, and the page marks that they differ."""
    primary = start_queue_server("--fsync", "never", "--replicate", "sync",
                                 config="[queue_server]\nmin_sync_replicas = 2\n")
    replica = start_queue_server("--fsync", "never", "--replica-of", primary.address,
                                 "--server-id", "2", "--promote-after", "600")
    client: TestClient = make_client(queue_servers=(primary.address, replica.address))
    servers = client.get("/api/queue-servers").json()
    assert [s["min_sync_replicas"] for s in servers] == [2, 0]
    html = client.get("/slotmap").text
    assert ", waits for 2" in html and ">differs</span>" in html
    metrics = client.get("/metrics").text
    assert f'slotmap_queue_server_min_sync_replicas{{server="{primary.address}"}} 2.0' in metrics
    assert f'slotmap_queue_server_min_sync_replicas{{server="{replica.address}"}} 0.0' in metrics
