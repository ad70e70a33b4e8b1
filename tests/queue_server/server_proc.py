"""Run a real `slotmap queue-server` subprocess on a free port (tests, benchmarks); no pytest needed.

    with running_queue_server(tmp_path, "--fsync", "never") as server:
        host, port, process = server
        QueueClient(server.address).put("q", b"x")
"""
from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_DEADLINE_S = 15.0
EXIT_DEADLINE_S = 10.0
POLL_INTERVAL_S = 0.02
BIND_ATTEMPTS = 3
# free_port()'s ports start here and end below the kernel's ephemeral range.
PORTS_FROM = 20000
PORT_PROBES = 200


@dataclass
class ServerProc:
    """A started server; unpacks as `host, port, process`."""

    host: str
    port: int
    process: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path

    def __iter__(self) -> Iterator[object]:
        return iter((self.host, self.port, self.process))

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """kill -9 and reap (no-op when already gone)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=EXIT_DEADLINE_S)


def slotmap_command() -> list[str]:
    """The `slotmap` console script of the running venv, else the module behind it."""
    for script in (Path(sys.executable).with_name("slotmap"), REPO_ROOT / ".venv" / "bin" / "slotmap"):
        if script.exists():
            return [str(script)]
    return [sys.executable, "-m", "deploy.cli"]


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_slice() -> range:
    """This process's ports: PORTS_FROM up to the ephemeral range, one slice per xdist worker."""
    top = _ephemeral_low()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    if top - PORTS_FROM < 100 * max(count, 1) or index >= count:
        return range(0)
    size = (top - PORTS_FROM) // count
    return range(PORTS_FROM + index * size, PORTS_FROM + (index + 1) * size)


class _PortWalk:
    """Hands out this process's ports in order from a random start, each checked bindable."""

    def __init__(self) -> None:
        self.ports = _port_slice()
        self.position = random.randrange(len(self.ports)) if self.ports else 0

    def next_free(self) -> int | None:
        for _ in range(min(len(self.ports), PORT_PROBES)):
            port = self.ports[self.position % len(self.ports)]
            self.position += 1
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind((HOST, port))
                except OSError:
                    continue  # held by someone else (a server of ours, another suite, a service)
                return port
        return None


_walk: _PortWalk | None = None
# One module, so one walk per process, under both names the tests import it by (procs.py
# loads it as `server_proc`, conftest.py as `tests.queue_server.server_proc`): two walks
# could hand out the same port before its server binds it.
for _alias in ("server_proc", "tests.queue_server.server_proc"):
    sys.modules.setdefault(_alias, sys.modules[__name__])


def free_port() -> int:
    """A port nothing is bound to now, for a server the caller starts next.

    Not from the kernel (bind to port 0): its ports come from the ephemeral range, where
    every outgoing connection on the machine takes one too, and two xdist workers asking at
    the same moment were handed the same port (a test then talked to the other worker's
    server). Here each worker walks a slice of its own below the ephemeral range, so the
    workers of one run never share a port and a port comes back only after the whole slice.
    Another suite on the machine can still take the port first: a caller that starts a
    server checks that its own process listens (listens_on) and picks again if not.
    """
    global _walk
    if _walk is None:
        _walk = _PortWalk()
    port = _walk.next_free()
    if port is not None:
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def refused_address() -> Iterator[str]:
    """`host:port` where connections are refused: bound, never listening, so no one else takes it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((HOST, 0))
        yield f"{HOST}:{holder.getsockname()[1]}"


def listens_on(process: subprocess.Popen[bytes], port: int) -> bool:
    """True when `process` itself holds a listening socket on `port`.

    Only a connect test would be fooled by another process that took the port
    between free_port() and our server's bind (tests of other suites run alongside).
    """
    try:
        sockets = psutil.Process(process.pid).net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(s.status == psutil.CONN_LISTEN and s.laddr.port == port for s in sockets)


def wait_listening(server: ServerProc) -> bool:
    """True once the server listens on its port; False when it exits first; RuntimeError at the
    deadline (the process killed)."""
    process, port = server.process, server.port
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if listens_on(process, port):
            return True
        time.sleep(POLL_INTERVAL_S)
    server.kill()
    raise RuntimeError(f"queue server did not listen on port {port} within {STARTUP_DEADLINE_S}s")


def launch_queue_server(
    log_dir: Path, *extra_args: str, data_dir: Path, port: int | None = None, name: str = "queue-server"
) -> ServerProc:
    """Spawn a server on `port` (a free one when None) without waiting for it: wait_listening."""
    data_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    listen_port = port or free_port()
    log_path = log_dir / f"{name}-{listen_port}.log"
    command = [
        *slotmap_command(), "queue-server",
        "--listen", f"{HOST}:{listen_port}", "--data-dir", str(data_dir), *extra_args,
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=log_dir, env=env)
    return ServerProc(HOST, listen_port, process, data_dir, log_path)


def port_was_taken(server: ServerProc) -> bool:
    """The server exited because another process took its port first (free_port's race)."""
    return "in use" in server.log_text().lower()


def start_queue_server(
    tmp_path: Path, *extra_args: str, data_dir: Path | None = None, port: int | None = None
) -> ServerProc:
    """Start a server and return once it listens on its port; the caller kills it.

    `port` (to restart a server where its clients expect it) is used as given;
    otherwise a free port is picked, and picked again if another process took it first.
    """
    directory = data_dir or Path(tempfile.mkdtemp(prefix="queue-data-", dir=tmp_path))
    for _ in range(BIND_ATTEMPTS):
        server = launch_queue_server(tmp_path, *extra_args, data_dir=directory, port=port)
        if wait_listening(server):
            return server
        if port is not None or not port_was_taken(server):
            raise RuntimeError(
                f"queue server exited with {server.process.returncode}: {server.process.args!r}\n"
                f"{server.log_text()}"
            )
    raise RuntimeError(f"queue server found no free port in {BIND_ATTEMPTS} attempts")


@contextlib.contextmanager
def running_queue_server(
    tmp_path: Path, *extra_args: str, data_dir: Path | None = None, port: int | None = None
) -> Iterator[ServerProc]:
    """A server for the `with` block, killed (SIGKILL) and reaped at its end."""
    server = start_queue_server(tmp_path, *extra_args, data_dir=data_dir, port=port)
    try:
        yield server
    finally:
        server.kill()


def raw_command(server: ServerProc, line: bytes) -> bytes:
    """One request on a fresh plain socket (for commands the client does not offer)."""
    with socket.create_connection((server.host, server.port), timeout=5.0) as sock:
        sock.sendall(line + b"\r\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(4096)
            assert chunk, f"connection closed before the reply to {line!r}"
            reply += chunk
        return reply.rstrip(b"\r\n")
