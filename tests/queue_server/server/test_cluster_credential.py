"""Only cluster members speak the cluster's commands (issue 25 point 6), on real servers.

- No credential configured (the loopback default): a server not configured for managed
  failover refuses LEASE, PROMOTE and FOLLOW whoever sends them (one `LEASE 0 1 0` used
  to fence a standalone server until restart).
- A link counts as a replica in sync only once it confirmed a snapshot, and a claimed
  address is the peer's or is not trusted: `INTERCONNECT 9 127.0.0.1 1` then `REPLACK 0`
  used to release a held sync PUT and put 127.0.0.1:1 in ROLE's in-sync list; so did
  `SNAPSHOT n <another host's ip> <port>`.
- With `cluster_token_file`, a real replica sending it replicates, while the admin's and
  a producer's tokens are refused the cluster's commands.
"""
from __future__ import annotations

from pathlib import Path

from procs import spawn_slotmap, to_toml, wait_listening

from tests.queue_server import server_proc
from tests.queue_server.server.ha import role
from tests.queue_server.util import poll_until

HOLD_S = "120"  # sync_timeout_s: the held PUT stays held through the whole test
LINK_S = 30.0  # generous: a busy 2-core machine


def test_a_standalone_server_refuses_the_managers_commands_from_anyone(start_queue_server):
    server = start_queue_server()
    client = server.connect()
    for line in (b"LEASE 0 1 0", b"PROMOTE 1", b"FOLLOW 127.0.0.1:1 1"):
        assert client.request(line).startswith(b"403 Forbidden: this server is not configured "
                                               b"for managed failover")
    assert client.request(b"PUT q 0 1\r\nx") == b"200 OK"  # not fenced
    assert role(client)[:1] == [b"primary"]
    assert role(client)[4] == b"0"  # epoch untouched


def _until_pong(link) -> None:  # type: ignore[no-untyped-def]
    """Read a replication link's stream (heartbeats, records) up to our PING's reply: the
    REPLACK sent before it has been handled, and whatever it released has been sent."""
    while link.line() != b"200 PONG":
        pass


def _link(server, request: bytes):  # type: ignore[no-untyped-def]
    """A raw replication link: the request, its reply (a snapshot read whole), REPLACK 0."""
    link = server.connect(timeout_s=LINK_S)
    link.send(request + b"\r\n")
    head = link.line().split()
    assert head[:2] == [b"200", b"OK"], head
    if request.startswith(b"SNAPSHOT"):
        link.exact(int(head[2]))
    link.send(b"REPLACK 0\r\nPING\r\n")
    _until_pong(link)
    return link


def test_only_a_snapshot_link_from_its_own_address_confirms_a_sync_put(start_queue_server):
    server = start_queue_server("--replicate", "sync", "--sync-timeout", HOLD_S)
    producer = server.connect(timeout_s=LINK_S)
    producer.send(b"PUT q 0 4\r\nheld\r\n")
    observer = server.connect()
    poll_until(lambda: role(observer)[1] == b"waiting", timeout_s=LINK_S, what="the PUT held")

    _link(server, b"INTERCONNECT 9 127.0.0.1 1")  # no snapshot: proves nothing
    assert producer.pending(0.3) == b""
    assert role(observer)[6] == b"-"

    _link(server, b"SNAPSHOT 8 10.9.9.9 7777")  # not where it comes from
    assert producer.pending(0.3) == b""
    assert role(observer)[6] == b"-"
    assert b"127.0.0.1:7777" in observer.request(b"REPLICAS") + observer.pending(0.3)
    assert "claims to be server 8 at 10.9.9.9:7777" in server.output_text()

    _link(server, b"SNAPSHOT 7 127.0.0.1 7401")  # a replica as follower.py is one
    producer.expect(b"200 OK\r\n")
    assert role(observer)[6] == b"127.0.0.1:7401"


def _tokens(tmp: Path) -> dict[str, Path]:
    paths = {}
    for role_name in ("admin", "producer", "cluster"):
        paths[role_name] = tmp / f"{role_name}.token"
        paths[role_name].write_text(f"{role_name}_secret_42\n")
    return paths


def test_the_cluster_credential_replicates_and_nothing_else_speaks_for_the_cluster(
        start_queue_server, tmp_path):
    paths = _tokens(tmp_path)
    config = (f'[queue_server]\ntoken_file = "{paths["admin"]}"\n'
              f'producer_token_file = "{paths["producer"]}"\n'
              f'cluster_token_file = "{paths["cluster"]}"\n')
    primary = start_queue_server(config=config)
    replica = start_queue_server("--replica-of", f"127.0.0.1:{primary.port}", "--server-id", "2",
                                 config=config)
    for who in ("admin", "producer"):
        client = primary.connect()
        client.send(f"AUTH {who}_secret_42\r\n".encode())
        client.expect(b"200 OK\r\n")
        for line in (b"SNAPSHOT 3 127.0.0.1 1", b"INTERCONNECT 3 127.0.0.1 1", b"LEASE 1 1 0",
                     b"REPLACK 0", b"SYNC DONE 1"):
            reply = client.request(line)
            assert reply.startswith(b"403 Forbidden: ") and b"the cluster credential" in reply, (who, reply)
    producer = primary.connect()
    producer.send(b"AUTH producer_secret_42\r\nPUT q 0 3\r\nrep\r\n")
    producer.expect(b"200 OK\r\n200 OK\r\n")
    on_replica = replica.connect()
    on_replica.send(b"AUTH admin_secret_42\r\n")
    on_replica.expect(b"200 OK\r\n")
    poll_until(lambda: on_replica.request(b"TOTAL q").split()[4:5] == [b"1"], timeout_s=LINK_S,
               what="the job on the replica")


def test_the_managers_sentinel_leases_with_the_cluster_credential(start_queue_server, tmp_path):
    """A managed server whose cluster commands need `cluster_token_file`: the real manager
    reads the same file and its LEASE is taken (the admin token alone would be refused)."""
    paths = _tokens(tmp_path)
    server_config = (f'[queue_server]\ntoken_file = "{paths["admin"]}"\n'
                     f'cluster_token_file = "{paths["cluster"]}"\n')
    server = start_queue_server("--managed", config=server_config)
    manager = None
    try:
        for _ in range(server_proc.BIND_ATTEMPTS):
            port = server_proc.free_port()
            config = tmp_path / "manager.toml"
            config.write_text(to_toml({
                "queue_server": {"servers": [server.address], "managed_failover": True,
                                 "token_file": str(paths["admin"]),
                                 "cluster_token_file": str(paths["cluster"])},
                "manager": {"listen": f"tcp://127.0.0.1:{port}",
                            "database_url": f"sqlite:///{tmp_path / 'manager.storage.db'}"},
            }))
            manager = spawn_slotmap(["manager", "--config", str(config)],
                                    log_path=tmp_path / "manager.log", cwd=tmp_path)
            if wait_listening(manager, port, tmp_path / "manager.log", what="the manager"):
                break
        client = server.connect()
        client.send(b"AUTH admin_secret_42\r\n")
        client.expect(b"200 OK\r\n")
        poll_until(lambda: role(client)[5] == b"held", timeout_s=LINK_S,
                   what=lambda: f"the lease\n{(tmp_path / 'manager.log').read_text()}")
        assert "cluster credential" not in server.output_text()
    finally:
        if manager is not None:
            manager.kill()
            manager.wait(timeout=10)
