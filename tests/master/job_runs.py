"""The end-to-end job tests' set-up and log (test_job_outcomes.py, test_crashes.py): a queue
server knowing the queues' settings, the jobs put before the master starts, and the runs
the test handlers (handlers/sm_test_outcomes.py, sm_test_crashes.py) append to a log."""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from master_procs import MasterProc, ServerFor, StartMaster, poll_until

from queue_server.client import QueueClient


@dataclass(frozen=True)
class Run:
    what: str
    pid: int
    key: str
    attempt: int
    n: int
    at: float


def runs(log: Path, what: str | None = None, n: int | None = None) -> list[Run]:
    if not log.exists():
        return []
    found = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) != 6:
            continue  # a line being written
        run = Run(parts[0], int(parts[1]), parts[2], int(parts[3]), int(parts[4]), float(parts[5]))
        if (what is None or run.what == what) and (n is None or run.n == n):
            found.append(run)
    return found


def done_numbers(log: Path) -> set[int]:
    return {run.n for run in runs(log, "done")}


def dead_job(master: MasterProc, key: str, *, timeout_s: float) -> Any:
    client = master.client()

    def dead() -> Any:
        master.assert_alive()
        info = client.job(key)
        return info if info is not None and info.state == "dead" else None

    return poll_until(dead, timeout_s=timeout_s,
                      what=lambda: f"job {key} dead (now {client.job(key)})\n{master.log_tail()}")


def put_jobs(client: QueueClient, queue: str, log: Path, actions: list[str], **extra: Any) -> list[str]:
    """One job per action ("ok", "raise", "exit", "fail", "sleep"), keyed "<queue>-<n>"."""
    return [
        client.put_job(queue, json.dumps({"log": str(log), "n": n, "do": do, **extra}),
                       key=f"{queue}-{n}").key
        for n, do in enumerate(actions)
    ]


def oks_but(count: int, bad: Mapping[int, str]) -> list[str]:
    """`count` actions, "ok" but for those of `bad` (job number -> action)."""
    return [bad.get(n, "ok") for n in range(count)]


@dataclass
class JobCluster:
    """Starts a queue server and a master running the test module's MODULES; the runs of
    every job go to `log`."""
    queue_server_for: ServerFor
    start_master: StartMaster
    modules: list[str]
    log: Path

    def start(self, queue: str, slots: int, settings: Mapping[str, Any], actions: list[str],
              **extra: Any) -> tuple[MasterProc, list[str]]:
        master, keys = self.start_queues({queue: slots}, {queue: settings}, {queue: actions}, **extra)
        return master, keys.get(queue, [])

    def start_queues(self, slots: Mapping[str, int], settings: Mapping[str, Mapping[str, Any]],
                     jobs: Mapping[str, list[str]], **extra: Any) -> tuple[MasterProc, dict[str, list[str]]]:
        """The jobs wait before the first slot starts, so each first GETB takes a full batch."""
        server = self.queue_server_for(settings)
        with QueueClient(server.address) as client:
            keys = {queue: put_jobs(client, queue, self.log, actions, **extra)
                    for queue, actions in jobs.items() if actions}
        master = self.start_master(modules=self.modules, static_slots=slots, queues=settings, server=server)
        return master, keys


@pytest.fixture
def job_cluster(request: pytest.FixtureRequest, queue_server_for: ServerFor, start_master: StartMaster,
                tmp_path: Path) -> JobCluster:
    """The handler modules are the test module's MODULES."""
    return JobCluster(queue_server_for, start_master, list(request.module.MODULES), tmp_path / "runs.log")
