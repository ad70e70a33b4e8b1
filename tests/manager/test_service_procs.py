"""Real processes for the manager tests: a queue server, managers, masters, `slotmap run`.

No tests here: the other test_service*/test_leader modules import these helpers. Every
process runs in its own session and `Cluster.close()` SIGKILLs each group, so whatever a
test leaves behind (slots included) dies with it.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from manager.db import Event, make_engine
from master.report import HostReport

T = TypeVar("T")
REPO_ROOT = Path(__file__).resolve().parents[2]
EXIT_DEADLINE_S = 10.0
# Fast heartbeats keep the tests short: lost after 4 x 0.25 s.
HEARTBEAT_S = 0.25
LIVENESS = 4
PLAN_INTERVAL_S = 0.5


def _server_proc() -> ModuleType:
    """tests/queue_server/server_proc.py (its own folder imports it by name)."""
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
               what: str | Callable[[], str] = "condition", interval_s: float = 0.05) -> T:
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


def to_toml(sections: Mapping[str, Mapping[str, Any]]) -> str:
    lines: list[str] = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in values.items()]
        lines.append("")
    return "\n".join(lines)


@dataclass
class Proc:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    report_path: Path | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 30) -> str:
        return f"--- {self.name} log ---\n" + "\n".join(self.log_text().splitlines()[-lines:])

    def kill_group(self) -> None:
        """SIGKILL the process and everything in its session (a master's slots)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=EXIT_DEADLINE_S)

    def report(self) -> HostReport | None:
        assert self.report_path is not None
        try:
            return HostReport.decode(self.report_path.read_bytes())
        except FileNotFoundError:
            return None

    def running(self) -> dict[str, int]:
        """Running slots per queue, from the master's report file."""
        report = self.report()
        counts: dict[str, int] = {}
        for slot in report.slots if report else []:
            if slot.state == "running":
                counts[slot.queue] = counts.get(slot.queue, 0) + 1
        return counts

    def slot_pids(self) -> dict[int, int]:
        report = self.report()
        return {s.slot_id: s.pid for s in report.slots} if report else {}


@dataclass
class Cluster:
    """A queue server plus managers and masters started on demand, all on free ports."""

    root: Path
    queues: dict[str, dict[str, Any]]
    database_url: str
    procs: list[Proc] = field(default_factory=list)
    manager_port: int = 0
    queue_server: Any = None
    ipc_dir: str = ""
    manager_settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, root: Path, queues: Mapping[str, Mapping[str, Any]], *,
               database_url: str | None = None, **manager: Any) -> Cluster:
        return cls(
            root=root,
            queues={name: dict(values) for name, values in queues.items()},
            database_url=database_url or f"sqlite:///{root / 'var' / 'slotmap.db'}",
            manager_port=server_proc.free_port(),
            ipc_dir=tempfile.mkdtemp(prefix="sm-mgr-", dir="/tmp"),
            manager_settings=dict(manager),
        )

    @property
    def manager_endpoint(self) -> str:
        return f"tcp://127.0.0.1:{self.manager_port}"

    def start_queue_server(self) -> None:
        self.queue_server = server_proc.start_queue_server(self.root, "--fsync", "never")

    def config(self, name: str, *, host_name: str = "unused", **master: Any) -> Path:
        assert self.queue_server is not None, "start the queue server first"
        sections: dict[str, Mapping[str, Any]] = {
            "queue_server": {"listen": self.queue_server.address},
            **{f"queues.{q}": values for q, values in self.queues.items()},
            "master": {
                "host_name": host_name, "ipc_dir": self.ipc_dir, "beacon_interval_ms": 100,
                "max_load_per_cpu": 1000.0, "stop_deadline_s": 5.0, "reserve_slots": 0,
                "max_slots": 4, **master,
            },
            "manager": {
                "listen": self.manager_endpoint, "database_url": self.database_url,
                "heartbeat_interval_s": HEARTBEAT_S, "heartbeat_liveness": LIVENESS,
                "plan_interval_s": PLAN_INTERVAL_S, "stats_window_s": 10.0,
                **self.manager_settings,
            },
        }
        path = self.root / f"{name}.toml"
        path.write_text(to_toml(sections))
        return path

    def spawn(self, name: str, args: list[str], *, report: bool = False) -> Proc:
        log_path = self.root / f"{name}.log"
        report_path = self.root / f"{name}.report.json" if report else None
        extra = ["--report-file", str(report_path), "--report-interval-s", "0.1"] if report else []
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [*server_proc.slotmap_command(), *args, *extra],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.root, env=env,
                start_new_session=True,
            )
        proc = Proc(name, process, log_path, report_path)
        self.procs.append(proc)
        return proc

    def start_manager(self, name: str = "manager") -> Proc:
        return self.spawn(name, ["manager", "--config", str(self.config(name))])

    def start_master(self, host: str, **settings: Any) -> Proc:
        config = self.config(f"master-{host}", host_name=host, **settings)
        return self.spawn(
            f"master-{host}",
            ["master", "--config", str(config), "--manager", self.manager_endpoint],
            report=True,
        )

    def events(self, kind: str | None = None) -> list[Event]:
        engine = make_engine(self.database_url)
        try:
            with Session(engine) as session:
                query = select(Event).order_by(Event.id)
                if kind is not None:
                    query = query.where(Event.kind == kind)
                return list(session.scalars(query))
        except SQLAlchemyError:  # the manager may not have created the tables yet
            return []
        finally:
            engine.dispose()

    def logs(self) -> str:
        return "\n".join(proc.log_tail() for proc in self.procs)

    def close(self) -> None:
        for proc in self.procs:
            proc.kill_group()
        if self.queue_server is not None:
            self.queue_server.kill()
        shutil.rmtree(self.ipc_dir, ignore_errors=True)


def wait_running(master: Proc, cluster: Cluster, expected: Mapping[str, int], *,
                 timeout_s: float = 15.0) -> dict[str, int]:
    """Poll the master's report until its running slots per queue are exactly `expected`."""
    def check() -> dict[str, int] | None:
        assert master.alive(), f"{master.name} exited\n{cluster.logs()}"
        running = master.running()
        return running if running == dict(expected) else None

    found = poll_until(check, timeout_s=timeout_s,
                       what=lambda: f"{master.name} running {dict(expected)}; has {master.running()}\n"
                                    f"{cluster.logs()}")
    assert found is not None
    return found
