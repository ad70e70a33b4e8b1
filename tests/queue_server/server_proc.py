"""Run a real `slotmap queue-server` subprocess on a free port (tests, benchmarks); no pytest needed.

    with running_queue_server(tmp_path, "--fsync", "never") as server:
        host, port, process = server
        QueueClient(server.address).put("q", b"x")
"""
from __future__ import annotations

import contextlib
import os
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


def free_port() -> int:
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
