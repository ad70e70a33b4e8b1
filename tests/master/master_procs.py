"""Real masters for tests: a queue server, a config file, `slotmap master`, its report file.

Every master runs in its own session, so teardown kills it and all its slots at once
(SIGKILL to the process group), whatever state the test left them in.
"""
from __future__ import annotations

import contextlib
import functools
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import procs
import pytest
from polling import DEADLINE_S
from procs import kill_session, log_lines, read_report, server_proc, spawn_slotmap, to_toml

from master.report import HostReport
from queue_server.client import QueueClient

HANDLERS_DIR = Path(__file__).resolve().parent / "handlers"
# The master tests poll every 20 ms, the manager tests every 50 ms.
poll_until = functools.partial(procs.poll_until, interval_s=0.02)


def cluster_toml(server: str, queues: Mapping[str, Mapping[str, Any]], master: Mapping[str, Any],
                 server_settings: Mapping[str, Any] | None = None) -> str:
    return to_toml({
        "queue_server": {"listen": server, **(server_settings or {})},
        **{f"queues.{name}": settings for name, settings in queues.items()},
        "master": master,
    })


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
    # Extra [queue_server] settings of the master's config (token_file, ...).
    server_settings: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    def report(self) -> HostReport | None:
        return read_report(self.report_path)

    def wait_report(self, predicate: Callable[[HostReport], bool], *, timeout_s: float = DEADLINE_S,
                    what: str = "report") -> HostReport:
        def check() -> HostReport | None:
            self.assert_alive()
            report = self.report()
            return report if report is not None and predicate(report) else None
        found = poll_until(check, timeout_s=timeout_s,
                           what=lambda: f"{what}\n--- master log ---\n{self.log_tail()}")
        assert found is not None
        return found

    def wait_running(self, queue: str, count: int, *, timeout_s: float = DEADLINE_S) -> HostReport:
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
        return log_lines(self.log_path, lines)

    def assert_alive(self) -> None:
        if self.process.poll() is not None:
            raise AssertionError(f"master exited with {self.process.returncode}\n{self.log_tail()}")

    def reload(self, static_slots: Mapping[str, int]) -> None:
        """Rewrite the config with a new static map and SIGHUP the master."""
        self.settings["static_slots"] = dict(static_slots)
        self.config_path.write_text(cluster_toml(self.server, self.queues, self.settings,
                                                 self.server_settings))
        self.process.send_signal(signal.SIGHUP)

    def kill_everything(self) -> None:
        for client in self.clients:
            client.close()
        kill_session(self.process)


StartMaster = Callable[..., MasterProc]
# queue_server_for: queue name -> settings, to a running queue server that knows them.
ServerFor = Callable[[Mapping[str, Mapping[str, Any]]], Any]


class _ServerAhead:
    """The next test's `--fsync never` queue server, launched when this test takes its own:
    it starts while this test runs instead of before the next one's master."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0
        self.launched: Any = None

    def _launch(self) -> Any:
        self.count += 1
        return server_proc.launch_queue_server(self.root, "--fsync", "never", name=f"ahead{self.count}",
                                               data_dir=self.root / f"data{self.count}")

    def take(self) -> Any:
        launched = self.launched or self._launch()
        self.launched = self._launch()
        if server_proc.wait_listening(launched):
            return launched
        if not server_proc.port_was_taken(launched):
            raise AssertionError(f"queue server exited at start:\n{launched.log_text()}")
        return server_proc.start_queue_server(self.root, "--fsync", "never")

    def close(self) -> None:
        if self.launched is not None:
            self.launched.kill()


@pytest.fixture(scope="session")
def _server_ahead(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_ServerAhead]:
    ahead = _ServerAhead(tmp_path_factory.mktemp("servers_ahead"))
    yield ahead
    ahead.close()


@pytest.fixture
def queue_server(_server_ahead: _ServerAhead) -> Iterator[Any]:
    server = _server_ahead.take()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def queue_server_for(tmp_path: Path) -> Iterator[ServerFor]:
    """start(queues) -> a queue server that knows these queues' settings (retry policy, lock
    time) from a config file, as a deployed one does; killed at the end of the test."""
    with contextlib.ExitStack() as stack:
        def start(queues: Mapping[str, Mapping[str, Any]]) -> Any:
            config = tmp_path / "queue-server.toml"
            config.write_text(to_toml({f"queues.{name}": dict(values) for name, values in queues.items()}))
            return stack.enter_context(
                server_proc.running_queue_server(tmp_path, "--fsync", "never", "--config", str(config))
            )

        yield start


@pytest.fixture
def start_master(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StartMaster]:
    """start(modules=[...], static_slots={...}, queues={...}, server=None, server_settings=None,
    **master settings) -> MasterProc; `server` (default: the queue_server fixture's, started
    only then) is the queue server to use, `server_settings` more of the config's [queue_server],
    `unbuffered` False: the master's output buffered by Python, as under systemd."""
    started: list[MasterProc] = []
    # ipc:// paths must stay under 108 bytes; pytest's tmp_path can be longer.
    ipc_dir = tempfile.mkdtemp(prefix="sm-", dir="/tmp")

    def start(*, modules: list[str], static_slots: Mapping[str, int],
              queues: Mapping[str, Mapping[str, Any]] | None = None, server: Any = None,
              server_settings: Mapping[str, Any] | None = None, unbuffered: bool = True,
              **settings: Any) -> MasterProc:
        number = len(started)
        address = (server or request.getfixturevalue("queue_server")).address
        master_settings: dict[str, Any] = {
            "handler_modules": modules,
            "ipc_dir": ipc_dir,
            "beacon_interval_ms": 100,
            # 2 s of silence before a slot counts as hung (the default 3 beacons are 0.3 s
            # here, less than a busy shared machine can leave a live slot unscheduled); the
            # tests of hang detection set their own.
            "hung_after_beacons": 20,
            "max_load_per_cpu": 1000.0,
            "stop_deadline_s": 5.0,
            "stop_timeout_s": 5.0,
            "static_slots": dict(static_slots),
            **settings,
        }
        queue_settings = {name: dict(values) for name, values in (queues or {}).items()}
        config_path = tmp_path / f"cluster{number}.toml"
        config_path.write_text(cluster_toml(address, queue_settings, master_settings, server_settings))
        report_path = tmp_path / f"report{number}.json"
        log_path = tmp_path / f"master{number}.log"
        process = spawn_slotmap(
            ["master", "--config", str(config_path),
             "--report-file", str(report_path), "--report-interval-s", "0.1"],
            log_path=log_path, cwd=tmp_path, pythonpath=[HANDLERS_DIR], unbuffered=unbuffered,
        )
        master = MasterProc(process, config_path, report_path, log_path, address,
                            queue_settings, master_settings, server_settings=dict(server_settings or {}))
        started.append(master)
        return master

    yield start
    for master in started:
        master.kill_everything()
    shutil.rmtree(ipc_dir, ignore_errors=True)
