"""Real processes for the manager tests: a queue server, managers, masters, `slotmap run`.

No tests here: the other test_service*/test_leader modules import these helpers. Every
process runs in its own session and `Cluster.close()` SIGKILLs each group, so whatever a
test leaves behind (slots included) dies with it.
"""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from polling import DEADLINE_S
from procs import REPO_ROOT as REPO_ROOT
from procs import (
    kill_session,
    log_lines,
    poll_until,
    read_report,
    server_proc,
    spawn_slotmap,
    to_toml,
    wait_listening,
)
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from manager.storage.db import Event, make_engine
from master.report import HostReport

# Fast heartbeats keep the tests short: lost after 8 x 0.25 s. Not 4 (1 s): on a busy shared
# 2-core machine a live master or manager can go a second unscheduled and be taken for lost.
HEARTBEAT_S = 0.25
LIVENESS = 8
PLAN_INTERVAL_S = 0.5


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
        return f"--- {self.name} log ---\n" + log_lines(self.log_path, lines)

    def kill_group(self) -> None:
        """SIGKILL the process and everything in its session (a master's slots)."""
        kill_session(self.process)

    def report(self) -> HostReport | None:
        assert self.report_path is not None
        return read_report(self.report_path)

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
    # More tables for every config written (e.g. "schedules.<name>").
    extra_sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A manager WarmClusters started before the test, and the config it read.
    warm_manager: Proc | None = None
    warm_config: str = ""

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

    @classmethod
    def with_queue_server(cls, root: Path, queues: Mapping[str, Mapping[str, Any]]) -> Iterator[Cluster]:
        """A pytest fixture's body: a cluster with its queue server up, closed after the test."""
        started = cls.create(root, queues)
        started.start_queue_server()
        try:
            yield started
        finally:
            started.close()

    @property
    def manager_endpoint(self) -> str:
        return f"tcp://127.0.0.1:{self.manager_port}"

    def start_queue_server(self) -> None:
        self.queue_server = server_proc.start_queue_server(self.root, "--fsync", "never")

    def config(self, name: str, *, host_name: str = "unused", **master: Any) -> Path:
        path = self.root / f"{name}.toml"
        path.write_text(self.config_text(host_name=host_name, **master))
        return path

    def config_text(self, *, host_name: str = "unused", **master: Any) -> str:
        assert self.queue_server is not None, "start the queue server first"
        sections: dict[str, Mapping[str, Any]] = {
            "queue_server": {"listen": self.queue_server.address},
            **{f"queues.{q}": values for q, values in self.queues.items()},
            "master": {
                # hung_after_beacons 20 (2 s): with 3 (0.3 s) a fresh clone saw slots killed
                # as hung right after the manager's kill, a master-loop stall of just over
                # 0.3 s at reconnect (left open, see the stop-8 note); 6 (0.6 s, the
                # production default's silence) is less than a busy shared 2-core machine
                # can leave a live slot or its master unscheduled. No test here is about hangs.
                "host_name": host_name, "ipc_dir": self.ipc_dir, "beacon_interval_ms": 100,
                "hung_after_beacons": 20,
                "max_load_per_cpu": 1000.0, "stop_deadline_s": 5.0, "reserve_slots": 0,
                "max_slots": 4, **master,
            },
            "manager": {
                "listen": self.manager_endpoint, "database_url": self.database_url,
                "heartbeat_interval_s": HEARTBEAT_S, "heartbeat_liveness": LIVENESS,
                "plan_interval_s": PLAN_INTERVAL_S, "stats_window_s": 10.0,
                **self.manager_settings,
            },
            **self.extra_sections,
        }
        return to_toml(sections)

    def spawn(self, name: str, args: list[str], *, report: bool = False) -> Proc:
        log_path = self.root / f"{name}.log"
        report_path = self.root / f"{name}.report.json" if report else None
        extra = ["--report-file", str(report_path), "--report-interval-s", "0.1"] if report else []
        process = spawn_slotmap([*args, *extra], log_path=log_path, cwd=self.root)
        proc = Proc(name, process, log_path, report_path)
        self.procs.append(proc)
        return proc

    def start_manager(self, name: str = "manager", *, standby: bool = False) -> Proc:
        """A manager on this cluster's port, returned once it listens there; with `standby`
        (it is to wait for the lease: another manager holds it, or its database cannot be
        reached) returned at once. The first is the one WarmClusters started ahead, if any."""
        warm = self.take_warm_manager(standby=standby)
        if warm is not None:
            return warm
        for _ in range(server_proc.BIND_ATTEMPTS):
            proc = self.spawn(name, ["manager", "--config", str(self.config(name))])
            if standby or wait_listening(proc.process, self.manager_port, proc.log_path, what=name):
                return proc
            # Another process took the port first (free_port's race): another port will do
            # while no process of this cluster was told this one.
            told = [other.name for other in self.procs if other.alive()]
            assert not told, f"{name}: port {self.manager_port} taken by another process; {told} use it"
            self.manager_port = server_proc.free_port()
        raise AssertionError(f"{name}: no free port in {server_proc.BIND_ATTEMPTS} attempts\n{self.logs()}")

    def take_warm_manager(self, *, standby: bool) -> Proc | None:
        """The manager started ahead (WarmClusters). It has written to the database already:
        a test that wants another manager first (a standby, another config) must not use
        WarmClusters, and is told so."""
        warm, self.warm_manager = self.warm_manager, None
        if warm is None:
            return None
        assert not standby and self.config_text() == self.warm_config, (
            "a test with WarmClusters asks for a manager unlike the warm one (a standby, or "
            "another config): give it a cluster of its own")
        assert warm.alive(), f"the warm manager exited\n{self.logs()}"
        return warm

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
                 timeout_s: float = DEADLINE_S) -> dict[str, int]:
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


class WarmClusters:
    """One module's clusters, each started (queue server, then an active manager listening)
    while the module's previous tests run, in threads: a test starts with what it would have
    started itself, and the manager's first-plan wait (its masters' liveness, 2 s) is behind it.

    For the tests whose first manager is an active one on the module's config: a test that
    asks for a standby or changes the config first fails (Cluster.take_warm_manager).
    `ahead` clusters start at once: more than one leaves less of a 2-core machine to the test
    under way, worth it only where that test is light.
    """

    def __init__(self, root: Path, queues: Mapping[str, Mapping[str, Any]], *, ahead: int = 1,
                 **manager: Any) -> None:
        self.root = root
        self.queues = queues
        self.manager = manager
        self.ahead = ahead
        self.count = 0
        self.pool = ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="warm-cluster")
        self.started: list[Future[Cluster]] = []

    @classmethod
    def for_module(cls, root: Path, queues: Mapping[str, Mapping[str, Any]], **settings: Any,
                   ) -> Iterator[WarmClusters]:
        """A module-scoped pytest fixture's body."""
        clusters = cls(root, queues, **settings)
        try:
            yield clusters
        finally:
            clusters.close()

    @classmethod
    def started_now(cls, request: pytest.FixtureRequest, users: str, root: Path,
                    queues: Mapping[str, Mapping[str, Any]], **settings: Any) -> Iterator[WarmClusters]:
        """As for_module, the first clusters started at once (a module-scoped fixture that an
        earlier test of the module uses too): for the module's tests using the fixture `users`."""
        clusters = cls(root, queues, **settings)
        for _ in range(min(clusters.ahead, _tests_using(request, users))):
            clusters._launch()
        try:
            yield clusters
        finally:
            clusters.close()

    def _start(self, root: Path) -> Cluster:
        cluster = Cluster.create(root, self.queues, **self.manager)
        try:
            cluster.start_queue_server()
            cluster.warm_manager = cluster.start_manager("manager")
            cluster.warm_config = cluster.config_text()
        except BaseException:
            cluster.close()
            raise
        return cluster

    def _launch(self) -> None:
        self.count += 1
        root = self.root / f"cluster{self.count}"
        root.mkdir()
        self.started.append(self.pool.submit(self._start, root))

    def take(self, request: pytest.FixtureRequest) -> Cluster:
        """This test's cluster (the next tests' started meanwhile); the caller closes it."""
        if not self.started:
            self._launch()
        taken = self.started.pop(0)
        while len(self.started) < min(self.ahead, _later_tests_using(request)):
            self._launch()
        return taken.result()

    def one(self, request: pytest.FixtureRequest) -> Iterator[Cluster]:
        """A function-scoped fixture's body: this test's cluster, closed after."""
        cluster = self.take(request)
        try:
            yield cluster
        finally:
            cluster.close()

    def close(self) -> None:
        for future in self.started:
            with contextlib.suppress(Exception):
                future.result().close()
        self.pool.shutdown()


def _later_tests_using(request: pytest.FixtureRequest) -> int:
    """How many later tests of this module (in this process) use the same fixture."""
    items = request.session.items
    here = items.index(request.node) if request.node in items else len(items)
    return sum(1 for item in items[here + 1:]
               if isinstance(item, pytest.Function) and item.module is request.node.module
               and request.fixturename in item.fixturenames)


def _tests_using(request: pytest.FixtureRequest, fixture: str) -> int:
    """How many tests of this module (in this process) use `fixture`."""
    return sum(1 for item in request.session.items
               if isinstance(item, pytest.Function) and item.module is request.module
               and fixture in item.fixturenames)
