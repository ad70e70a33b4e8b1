"""CURVE on the master link and the pulsar: one cluster key or per-host keys, real sockets and processes."""
from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
import zmq.auth
from hostile_peer import send_huge_frame
from polling import DEADLINE_S
from procs import wait_listening
from test_link import HEARTBEAT_S, context, endpoint
from test_service_procs import Cluster, poll_until, server_proc, spawn_slotmap, to_toml
from test_service_stats import report

from config.curve import ClientCurve, CurveKeys, write_host_key, write_secret
from config.errors import ConfigError
from manager.hosts.link import ManagerSocket
from manager.storage.store import EventKind
from master.manager_frames import MasterFrame
from master.manager_link import Heartbeats, ManagerLink
from slot.pulsar.client import PermitClient
from slot.pulsar.errors import PermitError

# The shared fixtures of the master link's tests.
__all__ = ["context", "endpoint"]


@pytest.fixture
def keys(tmp_path: Path) -> tuple[CurveKeys, Path, Path]:
    """The servers' key, and a directory holding the public keys of hosts alpha and beta."""
    write_host_key(tmp_path, "server")
    authorized = tmp_path / "authorized"
    authorized.mkdir()
    for host in ("alpha", "beta"):
        write_host_key(authorized, host)
    return CurveKeys.from_file(tmp_path / "server.key_secret"), authorized, tmp_path


def host_curve(authorized: Path, host: str, server: CurveKeys) -> ClientCurve:
    return ClientCurve(CurveKeys.from_file(authorized / f"{host}.key_secret"), server.public)


def hosts_heard(manager: ManagerSocket, links: list[ManagerLink], seconds: float) -> set[str]:
    heard: set[str] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for index, link in enumerate(links):
            link.poll(time.monotonic(), lambda i=index: report(f"host{i}", []))  # type: ignore[misc]
        heard |= {r.frame.report.host for r in manager.receive(0.02)}
    return heard


def test_per_host_keys_let_each_authorized_host_in_and_keep_a_stranger_out(
    endpoint: str, context: zmq.Context[zmq.Socket[bytes]], keys: tuple[CurveKeys, Path, Path],
) -> None:
    server, authorized, _ = keys
    manager = ManagerSocket(endpoint, curve=server, authorized_keys_dir=authorized)
    stranger_keys = CurveKeys(*zmq.curve_keypair())
    links = [
        ManagerLink([endpoint], Heartbeats.for_interval(HEARTBEAT_S, 3), context=context, curve=curve)
        for curve in (host_curve(authorized, "alpha", server), host_curve(authorized, "beta", server),
                      ClientCurve(stranger_keys, server.public))
    ]
    try:
        assert hosts_heard(manager, links, 1.5) == {"host0", "host1"}
    finally:
        for link in links:
            link.close()
        manager.close()


def test_removing_a_hosts_key_shuts_that_host_out_at_its_next_connection(
    endpoint: str, context: zmq.Context[zmq.Socket[bytes]], keys: tuple[CurveKeys, Path, Path],
) -> None:
    server, authorized, _ = keys
    manager = ManagerSocket(endpoint, curve=server, authorized_keys_dir=authorized)
    beta = host_curve(authorized, "beta", server)
    first = ManagerLink([endpoint], Heartbeats.for_interval(HEARTBEAT_S, 3), context=context, curve=beta)
    try:
        assert hosts_heard(manager, [first], 1.0) == {"host0"}
        first.close()
        (authorized / "beta.key").unlink()
        again = ManagerLink([endpoint], Heartbeats.for_interval(HEARTBEAT_S, 3), context=context, curve=beta)
        try:
            assert hosts_heard(manager, [again], 1.0) == set()
        finally:
            again.close()
    finally:
        first.close()
        manager.close()


def test_a_huge_frame_from_an_unauthenticated_peer_never_reaches_the_manager(
    endpoint: str, keys: tuple[CurveKeys, Path, Path],
) -> None:
    """With CURVE the handshake comes first: a raw peer's frame is refused before any body."""
    server, authorized, _ = keys
    manager = ManagerSocket(endpoint, curve=server, authorized_keys_dir=authorized)
    try:
        flood = send_huge_frame("127.0.0.1", int(endpoint.rsplit(":", 1)[1]),
                                claimed_bytes=1_500_000_000, send_at_most_bytes=64 * 1024 * 1024)
        assert flood.cut and flood.sent_bytes <= 32 * 1024 * 1024, flood
        assert manager.receive(0.2) == []
    finally:
        manager.close()


@pytest.fixture
def curve_pulsar(tmp_path: Path, keys: tuple[CurveKeys, Path, Path]) -> Iterator[tuple[str, Path]]:
    _, authorized, folder = keys
    port = server_proc.free_port()
    config = tmp_path / "pulsar.toml"
    config.write_text(
        f'curve_secret_file = "{folder / "server.key_secret"}"\n'
        f'curve_authorized_keys_dir = "{authorized}"\n\n'
        + to_toml({
            "queues.geo": {"rate_limit": {"permits": 1000, "period_s": 1.0}},
            "pulsar": {"listen": f"tcp://127.0.0.1:{port}"},
        })
    )
    log_path = tmp_path / "pulsar.log"
    process: subprocess.Popen[bytes] = spawn_slotmap(["pulsar", "--config", str(config)],
                                                     log_path=log_path, cwd=tmp_path)
    poll_until(lambda: "pulsar listening" in log_path.read_text() or process.poll() is not None,
               what="the pulsar listening")
    assert process.poll() is None, log_path.read_text()
    assert "with CURVE" in log_path.read_text()
    try:
        yield f"tcp://127.0.0.1:{port}", log_path
    finally:
        process.kill()
        process.wait(timeout=10)


def test_the_pulsar_with_curve_grants_permits_to_authorized_hosts_only(
    curve_pulsar: tuple[str, Path], keys: tuple[CurveKeys, Path, Path],
) -> None:
    endpoint, log_path = curve_pulsar
    server, authorized, _ = keys
    with PermitClient(endpoint, curve=host_curve(authorized, "alpha", server)) as alpha:
        alpha.acquire("geo", timeout_s=5.0)
        assert "geo" in alpha.states()
    stranger = ClientCurve(CurveKeys(*zmq.curve_keypair()), server.public)
    with PermitClient(endpoint, curve=stranger, reply_timeout_s=0.3) as client, \
            pytest.raises(PermitError):
        client.acquire("geo", timeout_s=1.0)
    # Without CURVE at all: no answer either.
    with PermitClient(endpoint, reply_timeout_s=0.3) as plain, pytest.raises(PermitError):
        plain.states()
    poll_until(lambda: "unknown public key" in log_path.read_text(), what="the refusal logged")


def test_key_files_are_never_overwritten_and_load_back(tmp_path: Path) -> None:
    secret = write_secret(tmp_path / "cluster.secret")
    assert (tmp_path / "cluster.secret").stat().st_mode & 0o077 == 0
    assert CurveKeys.from_file(tmp_path / "cluster.secret").secret == secret
    with pytest.raises(ConfigError, match="already exists"):
        write_secret(tmp_path / "cluster.secret")
    public_path, secret_path = write_host_key(tmp_path, "alpha")
    assert secret_path.stat().st_mode & 0o077 == 0
    public, _ = zmq.auth.load_certificate(str(public_path))
    assert CurveKeys.from_file(secret_path).public == public
    with pytest.raises(ConfigError, match="secret one"):
        CurveKeys.from_file(public_path)
    with pytest.raises(ConfigError, match="already exists"):
        write_host_key(tmp_path, "alpha")
    (tmp_path / "garbage").write_text("not a key\n")
    with pytest.raises(ConfigError, match="z85"):
        CurveKeys.from_file(tmp_path / "garbage")


def test_a_master_frame_from_a_host_key_decodes_at_the_manager(
    endpoint: str, context: zmq.Context[zmq.Socket[bytes]], keys: tuple[CurveKeys, Path, Path],
) -> None:
    """The raw DEALER side of CURVE (what a master does), without the heartbeat machinery."""
    server, authorized, _ = keys
    manager = ManagerSocket(endpoint, curve=server, authorized_keys_dir=authorized)
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    host_curve(authorized, "alpha", server).apply(dealer)
    dealer.connect(endpoint)
    try:
        def step() -> list[tuple[str, str | None]]:
            with contextlib.suppress(zmq.Again):
                dealer.send(MasterFrame(report=report("alpha", [])).encode(), zmq.NOBLOCK)
            return [(r.frame.report.host, r.key_owner) for r in manager.receive(0.05)]
        # The manager learns which host the key speaks for (its file name).
        assert poll_until(step, what="alpha's frame") == [("alpha", "alpha")]
    finally:
        dealer.close()
        manager.close()


def test_real_masters_join_a_curve_manager_with_their_host_keys_and_a_stranger_does_not(
    tmp_path: Path, keys: tuple[CurveKeys, Path, Path],
) -> None:
    _, authorized, folder = keys
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    write_host_key(stranger, "gamma")
    cluster = Cluster.create(tmp_path, {})
    try:
        cluster.start_queue_server()

        def with_keys(name: str, top: str) -> Path:
            path = cluster.root / f"{name}.toml"
            path.write_text(top + "\n" + path.read_text())
            return path

        cluster.config("manager")
        with_keys("manager", f'curve_secret_file = "{folder / "server.key_secret"}"\n'
                             f'curve_authorized_keys_dir = "{authorized}"\n')
        manager = cluster.spawn("manager", ["manager", "--config", str(cluster.root / "manager.toml")])
        assert wait_listening(manager.process, cluster.manager_port, manager.log_path, what="the manager"), \
            f"another process took port {cluster.manager_port} first"
        # delta borrows alpha's key: admitted, but it may speak only for alpha.
        for host, secret in (("alpha", authorized / "alpha.key_secret"),
                             ("gamma", stranger / "gamma.key_secret"),
                             ("delta", authorized / "alpha.key_secret")):
            cluster.config(f"master-{host}", host_name=host)
            config = with_keys(f"master-{host}", f'curve_secret_file = "{secret}"\n'
                                                 f'curve_server_key_file = "{folder / "server.key"}"\n')
            cluster.spawn(f"master-{host}", ["master", "--config", str(config),
                                             "--manager", cluster.manager_endpoint], report=True)
        poll_until(lambda: [e for e in cluster.events(EventKind.MASTER_JOINED) if e.host == "alpha"],
                   timeout_s=DEADLINE_S, what=lambda: f"alpha joined\n{cluster.logs()}")
        poll_until(lambda: "refused a CURVE client with an unknown public key" in manager.log_text(),
                   timeout_s=DEADLINE_S, what=lambda: f"gamma refused\n{cluster.logs()}")
        poll_until(lambda: "a report for host delta" in manager.log_text()
                   and "its CURVE key is alpha's" in manager.log_text(),
                   timeout_s=DEADLINE_S, what=lambda: f"delta refused\n{cluster.logs()}")
        assert [e.host for e in cluster.events(EventKind.MASTER_JOINED)] == ["alpha"], cluster.logs()
    finally:
        cluster.close()
