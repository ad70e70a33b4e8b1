"""SIGHUP under a manager (issue 27): the master keeps the manager's map and reloads its code,
the manager keeps running, and the hosts' code versions are in the manager's view."""
from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import server_proc
from reload_app import MODULE, lines, write_app
from sqlalchemy import select
from sqlalchemy.orm import Session
from test_service_procs import Cluster, poll_until, wait_running

from manager.storage.db import HostSample, make_engine
from queue_server.client import QueueClient

slotmap_command = server_proc.slotmap_command
QUEUES = {"roll": {"min_slots": 2, "max_slots": 2, "lock_timeout_s": 30.0}}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from Cluster.with_queue_server(tmp_path, QUEUES)


def test_sighup_keeps_the_managers_map_and_reloads_changed_code(cluster: Cluster, tmp_path: Path) -> None:
    app = tmp_path / "app"
    write_app(app, "v1")
    manager = cluster.start_manager()
    master = cluster.start_master("alpha", handler_modules=[MODULE], python_path=[str(app)])
    wait_running(master, cluster, {"roll": 2})
    pids = master.slot_pids()

    # The manager used to exit on SIGHUP, and `slotmap run` then stopped the cluster.
    manager.process.send_signal(signal.SIGHUP)
    poll_until(lambda: "config reloaded" in manager.log_text(), what="the manager's word")
    assert manager.alive()

    # Same code: the master used to apply the config's empty static map and stop every slot.
    master.process.send_signal(signal.SIGHUP)
    poll_until(lambda: "handler code unchanged" in master.log_text(), what=lambda: cluster.logs())
    assert "the slot map comes from the manager" in master.log_text()
    assert master.slot_pids() == pids and master.running() == {"roll": 2}

    write_app(app, "v2")
    master.process.send_signal(signal.SIGHUP)

    def rolled() -> bool:
        report = master.report()
        return (report is not None and report.code_generation == 1 and not report.code_reloading
                and master.running() == {"roll": 2})

    poll_until(rolled, what=lambda: cluster.logs())
    assert not set(master.slot_pids().values()) & set(pids.values())
    log = tmp_path / "runs.log"
    with QueueClient(cluster.queue_server.address) as client:
        client.put_many("roll", [json.dumps({"log": str(log), "sleep_s": 0.01})] * 4)
    poll_until(lambda: len(lines(log, "end")) == 4, what=lambda: cluster.logs())
    assert {run[1] for run in lines(log, "end")} == {"v2"}

    # The manager's view: an event for the reload, the version stored with the host's
    # samples (the Hosts page and /api/slotmap), and an event for a refused one.
    report = master.report()
    assert report is not None
    [reloaded] = poll_until(lambda: cluster.events("host_code_reloaded"), what=lambda: cluster.logs())
    assert reloaded.host == "alpha" and reloaded.detail["to"] == report.code_version
    poll_until(lambda: stored_version(cluster) == report.code_version, what="the stored version")
    shown = subprocess.run([*slotmap_command(), "hosts", "--config", str(cluster.root / "manager.toml")],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and re.search(rf"alpha +up +2 .* {report.code_version}", shown.stdout), shown
    (app / f"{MODULE}.py").write_text("not python\n")
    master.process.send_signal(signal.SIGHUP)
    [refused] = poll_until(lambda: cluster.events("host_code_reload_refused"), what=lambda: cluster.logs())
    assert "failed to import" in refused.message
    assert master.running() == {"roll": 2} and manager.alive()


def stored_version(cluster: Cluster) -> str | None:
    engine = make_engine(cluster.database_url)
    try:
        with Session(engine) as session:
            row = session.scalars(select(HostSample).order_by(HostSample.id.desc()).limit(1)).first()
            return None if row is None else row.code_version
    finally:
        engine.dispose()
