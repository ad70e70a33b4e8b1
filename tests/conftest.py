"""Shared fixtures: run the real queue server as a subprocess and talk raw bytes to it."""
from __future__ import annotations

import os
import signal
import socket
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The one launcher of queue servers, server_proc.py (no pytest there), for every server the tests start.
from tests import bytecode, file_order
from tests.queue_server import server_proc
from tests.queue_server.server_proc import EXIT_DEADLINE_S, ServerProc
from tests.queue_server.server_proc import HOST as HOST
from tests.queue_server.server_proc import free_port as free_port
from tests.queue_server.server_proc import slotmap_command as slotmap_command

REPLY_TIMEOUT_S = 5.0

# Files the tests write are private to their owner, like a real deployment's secrets: a
# token file or a config holding a token that others can read is refused at start
# (config/secret_files.py). Tests of that refusal chmod their files open explicitly.
os.umask(0o077)

# Property tests time nothing: hypothesis's default 200 ms deadline per example, and its
# too_slow health check, measure the machine (a shared 2-core box with busy loops beside
# the suite), not the code. Loaded before the test modules, so their own @settings inherit it.
settings.register_profile("slotmap", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("slotmap")


class RawClient:
    """One TCP connection: bytes in, bytes out, every read bounded by a timeout."""

    def __init__(self, host: str, port: int, *, timeout_s: float = REPLY_TIMEOUT_S) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout_s = timeout_s
        self.buffer = bytearray()
        self.eof = False
        self.reset = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, deadline: float) -> bool:
        """Read once more into the buffer; False at EOF. Raises AssertionError at the deadline."""
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(
                f"no complete reply within {self.timeout_s}s; received so far: {bytes(self.buffer)!r}"
            )
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            raise AssertionError(
                f"no complete reply within {self.timeout_s}s; received so far: {bytes(self.buffer)!r}"
            ) from None
        except ConnectionResetError:
            self.eof = self.reset = True
            return False
        if not chunk:
            self.eof = True
            return False
        self.buffer += chunk
        return True

    def line(self) -> bytes:
        """One reply line without its terminator; the server must end it with CRLF."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                raw = bytes(self.buffer[: end + 1])
                del self.buffer[: end + 1]
                assert raw.endswith(b"\r\n"), f"reply line not CRLF-terminated: {raw!r}"
                return raw[:-2]
            if not self._fill(deadline):
                raise AssertionError(
                    f"connection closed (reset={self.reset}) before a full line; got {bytes(self.buffer)!r}"
                )

    def exact(self, n: int) -> bytes:
        deadline = time.monotonic() + self.timeout_s
        while len(self.buffer) < n:
            if not self._fill(deadline):
                raise AssertionError(
                    f"connection closed (reset={self.reset}) after {len(self.buffer)} of {n} bytes: "
                    f"{bytes(self.buffer)!r}"
                )
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    def expect(self, data: bytes) -> None:
        """The next reply bytes are exactly `data`."""
        deadline = time.monotonic() + self.timeout_s
        while len(self.buffer) < len(data):
            if bytes(self.buffer) != data[: len(self.buffer)]:
                break
            if not self._fill(deadline):
                break
        got = bytes(self.buffer[: len(data)])
        assert got == data, f"expected {data!r}, got {bytes(self.buffer)!r} (eof={self.eof})"
        del self.buffer[: len(data)]

    def request(self, line: bytes) -> bytes:
        """Send one request line (CRLF added) and return the reply line."""
        self.send(line + b"\r\n")
        return self.line()

    def pending(self, wait_s: float = 0.05) -> bytes:
        """Whatever has arrived (or arrives within `wait_s`), consumed. For absence checks."""
        deadline = time.monotonic() + wait_s
        while not self.eof and time.monotonic() < deadline:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                self.eof = self.reset = True
                break
            if not chunk:
                self.eof = True
                break
            self.buffer += chunk
        data = bytes(self.buffer)
        self.buffer.clear()
        return data

    def closed(self, timeout_s: float = REPLY_TIMEOUT_S) -> bool:
        """True when the server closes the connection within `timeout_s`; data stays buffered."""
        deadline = time.monotonic() + timeout_s
        while not self.eof:
            try:
                self._fill(deadline)
            except AssertionError:
                return False
        return True

    def close(self) -> None:
        self.sock.close()


@dataclass
class QueueServer(ServerProc):
    """A running `slotmap queue-server` (server_proc.py starts it) and the raw connections to it."""

    clients: list[RawClient] = field(default_factory=list)

    @classmethod
    def of(cls, server: ServerProc) -> QueueServer:
        return cls(server.host, server.port, server.process, server.data_dir, server.log_path)

    def connect(self, *, timeout_s: float = REPLY_TIMEOUT_S) -> RawClient:
        client = RawClient(self.host, self.port, timeout_s=timeout_s)
        self.clients.append(client)
        return client

    def output_text(self) -> str:
        """The server's output so far (stdout and stderr in one log)."""
        return self.log_text()

    def is_running(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """kill -9, reap, and close the connections."""
        super().kill()
        self.close_clients()

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def wait_exit(self, timeout_s: float = EXIT_DEADLINE_S) -> int:
        return self.process.wait(timeout=timeout_s)

    def close_clients(self) -> None:
        for client in self.clients:
            client.close()
        self.clients.clear()


StartServer = Callable[..., QueueServer]


class _WarmPool:
    """Default-configured servers started ahead of time: start-up overlaps the previous test."""

    def __init__(self, root: Path, size: int) -> None:
        self.root = root
        self.size = size
        self.counter = 0
        self.launches: list[ServerProc] = []

    def _data_dir(self) -> Path:
        self.counter += 1
        return self.root / f"data{self.counter}"

    def _refill(self) -> None:
        while len(self.launches) < self.size:
            self.launches.append(server_proc.launch_queue_server(
                self.root, data_dir=self._data_dir(), name=f"pooled{self.counter}"))

    def take(self) -> QueueServer:
        self._refill()
        launch = self.launches.pop(0)
        self._refill()
        if server_proc.wait_listening(launch):
            return QueueServer.of(launch)
        if not server_proc.port_was_taken(launch):
            raise AssertionError(f"pooled queue server exited at start:\n{launch.log_text()}")
        return QueueServer.of(server_proc.start_queue_server(self.root, data_dir=self._data_dir()))

    def close(self) -> None:
        for launch in self.launches:
            launch.kill()


@pytest.fixture(scope="session")
def _warm_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_WarmPool]:
    pool = _WarmPool(tmp_path_factory.mktemp("pooled_servers"), size=1)
    yield pool
    pool.close()


@pytest.fixture
def start_queue_server(tmp_path: Path) -> Iterator[StartServer]:
    """Factory: start(*extra_args, config=TOML text, data_dir=path) -> QueueServer; all killed at the end."""
    started: list[QueueServer] = []
    counter = iter(range(1, 1000))

    def start(*extra_args: str, config: str | None = None, data_dir: Path | None = None) -> QueueServer:
        number = next(counter)
        directory = data_dir if data_dir is not None else tmp_path / f"data{number}"
        args = list(extra_args)
        if config is not None:
            config_path = tmp_path / f"server{number}.toml"
            config_path.write_text(config)
            args += ["--config", str(config_path)]
        server = QueueServer.of(server_proc.start_queue_server(tmp_path, *args, data_dir=directory))
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()


@pytest.fixture(scope="module")
def start_module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartServer]:
    """Like start_queue_server, but the servers live for the whole test module."""
    root = tmp_path_factory.mktemp("module_servers")
    started: list[QueueServer] = []
    counter = iter(range(1, 1000))

    def start(*extra_args: str, config: str | None = None) -> QueueServer:
        number = next(counter)
        args = list(extra_args)
        if config is not None:
            config_path = root / f"server{number}.toml"
            config_path.write_text(config)
            args += ["--config", str(config_path)]
        server = QueueServer.of(server_proc.start_queue_server(root, *args, data_dir=root / f"data{number}"))
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()


def _snapshot_of(server: QueueServer) -> bytes:
    client = RawClient(server.host, server.port)
    try:
        client.send(b"SNAPSHOT\r\n")
        head = client.line()
        assert head.startswith(b"200 OK "), f"SNAPSHOT of a fresh server: {head!r}"
        return client.exact(int(head[len(b"200 OK "):]))
    finally:
        client.close()


def _reset(server: QueueServer, empty_snapshot: bytes) -> str | None:
    """Bring a used server back to its empty state; None on success, else what went wrong."""
    if not server.is_running():
        return "the server is no longer running"
    client = RawClient(server.host, server.port)
    try:
        client.send(b"ONLINE\r\nCLONE %d\r\n" % len(empty_snapshot) + empty_snapshot)
        client.send(b"TOTAL\r\nRUNLIST\r\n")
        replies = [client.line() for _ in range(4)]
    except (AssertionError, OSError) as exc:
        return f"reset failed: {exc}"
    finally:
        client.close()
    expected = [b"200 OK Switched to Online Mode", b"200 OK", b"200 OK 0 0 0 0", b"200 OK 0"]
    return None if replies == expected else f"reset replies {replies!r}, expected {expected!r}"


class _ReusedServer:
    """One default server reused from test to test, emptied by CLONE of its own first snapshot.

    Starting a server costs far more than a test; tests that need counters from zero
    (STATS) or a never-used server are marked `fresh_server`. When the reset does not
    come back exactly empty, the server is dropped and a new one started, with a warning.
    """

    def __init__(self, pool: _WarmPool) -> None:
        self.pool = pool
        self.server: QueueServer | None = None
        self.empty_snapshot = b""

    def acquire(self) -> QueueServer:
        if self.server is not None:
            problem = _reset(self.server, self.empty_snapshot)
            if problem is None:
                return self.server
            warnings.warn(f"reused queue server dropped: {problem}", stacklevel=2)
            self.server.kill()
        self.server = self.pool.take()
        self.empty_snapshot = _snapshot_of(self.server)
        return self.server

    def release(self, server: QueueServer) -> None:
        server.close_clients()
        if not server.is_running():
            server.kill()
            self.server = None

    def close(self) -> None:
        if self.server is not None:
            self.server.kill()


@pytest.fixture(scope="session")
def _reused_server(_warm_pool: _WarmPool) -> Iterator[_ReusedServer]:
    reused = _ReusedServer(_warm_pool)
    yield reused
    reused.close()


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, before the workers start
        bytecode.compile_product()
    config.addinivalue_line(
        "markers", "fresh_server: the queue_server fixture must be a never-used server process"
    )


def pytest_itemcollected(item: pytest.Item) -> None:
    """Under `make test` (pytest-xdist, `--dist loadgroup`) a file's tests stay on one worker:
    its module-scoped servers and clusters start once, not once per worker. (Under pytest 9
    xdist 3.8 cannot name the groups, and every test went its own way: pyproject.toml
    keeps pytest below 9.)"""
    if item.get_closest_marker("xdist_group") is None:
        item.add_marker(pytest.mark.xdist_group(item.location[0]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The workers hand the files out longest first (tests/file_order.py)."""
    if hasattr(config, "workerinput"):
        file_order.longest_files_first(items, file_order.known_seconds(config))


_reports: list[pytest.TestReport] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _reports.append(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The run's seconds per file, for the next run's order (the controller under xdist)."""
    if not hasattr(session.config, "workerinput"):
        file_order.record(session.config, _reports)


@pytest.fixture
def queue_server(
    request: pytest.FixtureRequest, _warm_pool: _WarmPool, _reused_server: _ReusedServer
) -> Iterator[QueueServer]:
    """An empty server with default settings (SLOTMAP_TEST_FRESH_SERVERS=1: a new process every time)."""
    if request.node.get_closest_marker("fresh_server") or os.environ.get("SLOTMAP_TEST_FRESH_SERVERS"):
        server = _warm_pool.take()
        yield server
        server.kill()
        return
    server = _reused_server.acquire()
    yield server
    _reused_server.release(server)


class _ReusedServers:
    """Servers of one test module kept from test to test, one per (arguments, config),
    each emptied by CLONE of its own first snapshot before it is handed out again (ids,
    keys and per-queue counters start over; _reset checks TOTAL and RUNLIST come back
    empty). A server that is gone or does not come back empty is replaced, with a warning."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.counter = iter(range(1, 1000))
        self.servers: dict[tuple[tuple[str, ...], str | None, int], tuple[QueueServer, bytes]] = {}

    def acquire(self, args: tuple[str, ...], config: str | None, instance: int) -> QueueServer:
        key = (args, config, instance)
        if key in self.servers:
            server, empty = self.servers.pop(key)
            problem = _reset(server, empty)
            if problem is None:
                self.servers[key] = (server, empty)
                return server
            warnings.warn(f"reused queue server {args!r} dropped: {problem}", stacklevel=3)
            server.kill()
        number = next(self.counter)
        command = list(args)
        if config is not None:
            config_path = self.root / f"reused{number}.toml"
            config_path.write_text(config)
            command += ["--config", str(config_path)]
        server = QueueServer.of(server_proc.start_queue_server(
            self.root, *command, data_dir=self.root / f"reused{number}"))
        self.servers[key] = (server, _snapshot_of(server))
        return server

    def release(self) -> None:
        for server, _ in self.servers.values():
            server.close_clients()

    def close(self) -> None:
        for server, _ in self.servers.values():
            server.kill()


@pytest.fixture(scope="module")
def _module_reused_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_ReusedServers]:
    reused = _ReusedServers(tmp_path_factory.mktemp("reused_servers"))
    yield reused
    reused.close()


@pytest.fixture
def reused_queue_server(_module_reused_servers: _ReusedServers) -> Iterator[StartServer]:
    """Factory: start(*extra_args, config=TOML text, instance=0) -> an empty QueueServer of
    those settings, the same process for every test of the module that asks for the same
    ones (a start costs far more than most tests); another `instance` number for a second
    server of the same settings in one test. For tests that neither restart, kill nor freeze
    their server, nor read its log (earlier tests wrote there too); SLOTMAP_TEST_FRESH_SERVERS=1
    gives a new process every time."""
    fresh: list[QueueServer] = []

    def start(*extra_args: str, config: str | None = None, instance: int = 0) -> QueueServer:
        if os.environ.get("SLOTMAP_TEST_FRESH_SERVERS"):
            number = len(fresh) + 1
            args = list(extra_args)
            root = _module_reused_servers.root
            if config is not None:
                path = Path(tempfile.mkdtemp(prefix=f"fresh{number}-", dir=root)) / "server.toml"
                path.write_text(config)
                args += ["--config", str(path)]
            server = QueueServer.of(server_proc.start_queue_server(root, *args))
            fresh.append(server)
            return server
        return _module_reused_servers.acquire(tuple(extra_args), config, instance)

    yield start
    for server in fresh:
        server.kill()
    _module_reused_servers.release()
