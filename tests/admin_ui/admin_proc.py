"""Run the real `slotmap admin` process on a free port; `stop()` always ends it (SIGTERM, then SIGKILL)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import admin_sample
import httpx
from procs import free_port, server_proc, slotmap_command

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
START_DEADLINE_S = 20.0
listens_on = server_proc.listens_on
STOP_DEADLINE_S = 10.0


@dataclass
class AdminProc:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str, **kwargs: object) -> httpx.Response:
        return httpx.get(self.url + path, timeout=5.0, **kwargs)  # type: ignore[arg-type]

    def stop(self) -> int:
        """SIGTERM (uvicorn shuts down gracefully), SIGKILL to the group past the deadline."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.wait(timeout=STOP_DEADLINE_S)

    def stop_later(self) -> None:
        """SIGTERM now; reap_stopped() waits for the exit (SIGKILL past the deadline). uvicorn
        stops in 0.1 s, but the interpreter then takes 0.5 s to 2 s to exit: a test need not wait."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        _stopping.append(self)


_stopping: list[AdminProc] = []


def reap_stopped() -> None:
    """Wait for every dashboard told to stop_later (the next start and the session's end call this)."""
    while _stopping:
        _stopping.pop().stop()


def _serving(proc: AdminProc) -> bool:
    """Our own process listens on its port and answers. An answer alone was not enough: when
    another process took the port first, its dashboard answered while ours exited."""
    if not listens_on(proc.process, proc.port):
        return False
    try:
        return proc.get("/static/app.css").status_code == 200
    except httpx.HTTPError:
        return False


def start_admin(config: Path, log_dir: Path, *extra: str, env: dict[str, str] | None = None) -> AdminProc:
    """`slotmap admin --config config --listen 127.0.0.1:<free>`; returns once it serves."""
    reap_stopped()
    for attempt in range(3):
        port = free_port()
        log_path = log_dir / f"admin.{port}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [*slotmap_command(), "admin", "--config", str(config), "--listen", f"{HOST}:{port}", *extra],
                stdout=log, stderr=subprocess.STDOUT, cwd=log_dir, start_new_session=True,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1", **(env or {})},
            )
        proc = AdminProc(process, port, log_path)
        deadline = time.monotonic() + START_DEADLINE_S
        while process.poll() is None and not _serving(proc):
            if time.monotonic() > deadline:
                proc.stop()
                raise AssertionError(f"slotmap admin not serving within {START_DEADLINE_S}s:\n{proc.log_text()}")
            time.sleep(0.05)
        if process.poll() is None:
            return proc
        if "address already in use" not in proc.log_text().lower() or attempt == 2:
            raise AssertionError(f"slotmap admin exited with {process.returncode}:\n{proc.log_text()}")
    raise AssertionError("unreachable")


@contextlib.contextmanager
def cluster_admin(cluster: Any, extra_toml: str = "", *, token: str | None = None) -> Iterator[AdminProc]:
    """The dashboard over a tests/manager Cluster's database, its config plus `extra_toml`
    (and an [admin] section with `token`)."""
    if token is not None:
        extra_toml += f'\n[admin]\ntoken = "{token}"\n'
    config: Path = cluster.config("admin")
    config.write_text(config.read_text() + extra_toml)
    proc = start_admin(config, cluster.root)
    try:
        yield proc
    finally:
        proc.stop_later()


@contextlib.contextmanager
def cluster_admin_while(waiting: Callable[[], object], cluster: Any, extra_toml: str = "", *,
                        token: str | None = None) -> Iterator[AdminProc]:
    """cluster_admin, started while `waiting` runs in a thread (a master's wait for its first
    plan, the manager's 2 s grace); yields once both are done, raising `waiting`'s error."""
    with ThreadPoolExecutor(1) as pool:
        waited = pool.submit(waiting)
        with cluster_admin(cluster, extra_toml, token=token) as proc:
            waited.result()
            yield proc


@contextlib.contextmanager
def sample_admin(database_url: str, root: Path, *extra: str, token: str | None = None,
                 extra_toml: str = "") -> Iterator[AdminProc]:
    """The dashboard over `database_url` with the sample queues' config (admin_sample), an
    [admin] token when given, plus `extra_toml`; `extra` goes on its command line."""
    config = root / "cluster.toml"
    config.write_text(admin_sample.config_toml(database_url, token=token) + extra_toml)
    proc = start_admin(config, root, *extra)
    try:
        yield proc
    finally:
        proc.stop_later()
