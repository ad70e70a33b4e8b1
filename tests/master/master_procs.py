"""Real masters for tests: a queue server, a config file, `slotmap master`, its report file.

Every master runs in its own session, so teardown kills it and all its slots at once
(SIGKILL to the process group), whatever state the test left them in.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

from master.report import HostReport
from queue_server.client import QueueClient

T = TypeVar("T")
REPO_ROOT = Path(__file__).resolve().parents[2]
HANDLERS_DIR = Path(__file__).resolve().parent / "handlers"
EXIT_DEADLINE_S = 10.0


def _server_proc() -> ModuleType:
    """tests/queue_server/server_proc.py (the queue tests import it from their own folder)."""
    loaded = sys.modules.get("server_proc")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(
        "server_proc", REPO_ROOT / "tests" / "queue_server" / "server_proc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["server_proc"] = module
    spec.loader.exec_module(module)
    return module


server_proc = _server_proc()


def poll_until(predicate: Callable[[], T], *, timeout_s: float = 10.0,
               what: str | Callable[[], str] = "condition", interval_s: float = 0.02) -> T:
    """Call `predicate` until it returns something truthy; fail with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = what() if callable(what) else what
            raise AssertionError(f"{text}: not reached within {timeout_s} s (last: {value!r})")
        time.sleep(interval_s)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {value!r}")


def cluster_toml(server: str, queues: Mapping[str, Mapping[str, Any]], master: Mapping[str, Any]) -> str:
    lines = ["[queue_server]", f"listen = {toml_value(server)}", ""]
    for name, settings in queues.items():
        lines.append(f"[queues.{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in settings.items()]
        lines.append("")
    lines.append("[master]")
    lines += [f"{key} = {toml_value(value)}" for key, value in master.items()]
    return "\n".join(lines) + "\n"


@dataclass
class MasterProc:
    process: subprocess.Popen[bytes]
    config_path: Path
    report_path: Path
    log_path: Path
    server: str
    queues: dict[str, dict[str, Any]]
    settings: dict[str, Any]
    clients: list[QueueClient] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def report(self) -> HostReport | None:
        try:
            return HostReport.decode(self.report_path.read_bytes())
        except FileNotFoundError:
            return None

    def wait_report(self, predicate: Callable[[HostReport], bool], *, timeout_s: float = 10.0,
                    what: str = "report") -> HostReport:
        def check() -> HostReport | None:
            self.assert_alive()
            report = self.report()
            return report if report is not None and predicate(report) else None
        found = poll_until(check, timeout_s=timeout_s,
                           what=lambda: f"{what}\n--- master log ---\n{self.log_tail()}")
        assert found is not None
        return found

    def wait_running(self, queue: str, count: int, *, timeout_s: float = 10.0) -> HostReport:
        return self.wait_report(
            lambda r: sum(1 for s in r.slots if s.queue == queue and s.state == "running") == count,
            timeout_s=timeout_s, what=f"{count} running slots of {queue}",
        )

    def client(self) -> QueueClient:
        client = QueueClient(self.server, timeout_s=10.0)
        self.clients.append(client)
        return client

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def assert_alive(self) -> None:
        if self.process.poll() is not None:
            raise AssertionError(f"master exited with {self.process.returncode}\n{self.log_tail()}")

    def reload(self, static_slots: Mapping[str, int]) -> None:
        """Rewrite the config with a new static map and SIGHUP the master."""
        self.settings["static_slots"] = dict(static_slots)
        self.config_path.write_text(cluster_toml(self.server, self.queues, self.settings))
        self.process.send_signal(signal.SIGHUP)

    def kill_everything(self) -> None:
        for client in self.clients:
            client.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=EXIT_DEADLINE_S)


StartMaster = Callable[..., MasterProc]


@pytest.fixture
def queue_server(tmp_path: Path) -> Iterator[Any]:
    with server_proc.running_queue_server(tmp_path, "--fsync", "never") as server:
        yield server


@pytest.fixture
def start_master(tmp_path: Path, queue_server: Any) -> Iterator[StartMaster]:
    """start(modules=[...], static_slots={...}, queues={...}, **master settings) -> MasterProc."""
    started: list[MasterProc] = []
    # ipc:// paths must stay under 108 bytes; pytest's tmp_path can be longer.
    ipc_dir = tempfile.mkdtemp(prefix="sm-", dir="/tmp")

    def start(*, modules: list[str], static_slots: Mapping[str, int],
              queues: Mapping[str, Mapping[str, Any]] | None = None, **settings: Any) -> MasterProc:
        number = len(started)
        master_settings: dict[str, Any] = {
            "handler_modules": modules,
            "ipc_dir": ipc_dir,
            "beacon_interval_ms": 100,
            "max_load_per_cpu": 1000.0,
            "stop_deadline_s": 5.0,
            "static_slots": dict(static_slots),
            **settings,
        }
        queue_settings = {name: dict(values) for name, values in (queues or {}).items()}
        config_path = tmp_path / f"cluster{number}.toml"
        config_path.write_text(cluster_toml(queue_server.address, queue_settings, master_settings))
        report_path = tmp_path / f"report{number}.json"
        log_path = tmp_path / f"master{number}.log"
        env = dict(os.environ, PYTHONPATH=f"{REPO_ROOT}{os.pathsep}{HANDLERS_DIR}", PYTHONUNBUFFERED="1")
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [*server_proc.slotmap_command(), "master", "--config", str(config_path),
                 "--report-file", str(report_path), "--report-interval-s", "0.1"],
                stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env=env, start_new_session=True,
            )
        master = MasterProc(process, config_path, report_path, log_path, queue_server.address,
                            queue_settings, master_settings)
        started.append(master)
        return master

    yield start
    for master in started:
        master.kill_everything()
    shutil.rmtree(ipc_dir, ignore_errors=True)
