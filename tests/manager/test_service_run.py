"""`slotmap run`: the whole chain starts, jobs flow, and SIGTERM stops every process it started."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from test_service_procs import REPO_ROOT, poll_until, server_proc, to_toml

from config.load import load_config
from config.paths import run_files
from deploy.launcher import DEFAULT_CONFIG, child_specs
from queue_server.client import QueueClient

STOP_DEADLINE_S = 30.0


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, str, set[int]]]:
    """`slotmap run` on free ports in tmp_path; at the end everything it started is SIGKILLed."""
    queue_address = f"127.0.0.1:{server_proc.free_port()}"
    config = tmp_path / "cluster.toml"
    default = load_config(DEFAULT_CONFIG)
    config.write_text(to_toml({
        "queue_server": {"listen": queue_address, "fsync": "never"},
        **{f"queues.{name}": q.model_dump(exclude_unset=True) for name, q in default.queues.items()},
        "master": {"ipc_dir": "./var/ipc", "max_slots": 8, "max_load_per_cpu": 1000.0,
                   "stop_deadline_s": 5.0},
        "manager": {"listen": f"tcp://127.0.0.1:{server_proc.free_port()}",
                    "heartbeat_interval_s": 0.25, "heartbeat_liveness": 4, "plan_interval_s": 1.0},
        "admin": {"listen": f"127.0.0.1:{server_proc.free_port()}"},
    }))
    output = tmp_path / "run.out"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    with open(output, "wb") as out:
        launcher = subprocess.Popen(
            [*server_proc.slotmap_command(), "run", "--config", str(config)],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, env=env, start_new_session=True,
        )
    seen: set[int] = set()
    try:
        yield launcher, output, queue_address, seen
    finally:
        for pid in [launcher.pid, *seen]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        launcher.wait(timeout=10)


def descendants(pid: int) -> set[int]:
    with contextlib.suppress(psutil.NoSuchProcess):
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    return set()


def still_running(pids: set[int]) -> list[str]:
    alive = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{pid} {' '.join(process.cmdline())}")
    return alive


def test_slotmap_run_starts_the_chain_jobs_get_done_and_sigterm_stops_every_child(
    launched: tuple[subprocess.Popen[bytes], Path, str, set[int]],
) -> None:
    launcher, output, queue_address, seen = launched

    def log() -> str:
        return output.read_text(errors="replace")

    poll_until(lambda: "the cluster is up" in log() or launcher.poll() is not None, timeout_s=30.0,
               what=lambda: f"the cluster up\n{log()}")
    assert launcher.poll() is None, log()
    started = {name: int(pid) for name, pid in re.findall(r"started (\S+) \(pid (\d+)\)", log())}
    assert {"queue-server", "pulsar", "manager", "master", "demo-producer"} <= set(started)

    with QueueClient(queue_address, timeout_s=5.0) as client:
        def done() -> int:
            return sum(s.done for s in client.stats().values())
        first = poll_until(done, timeout_s=30.0, what=lambda: f"jobs done\n{log()}")
        poll_until(lambda: done() > first + 100, timeout_s=30.0, what="DONE counters growing")
    seen |= descendants(launcher.pid)
    assert set(started.values()) <= seen
    assert len(seen) > len(started), "the master has slots"

    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=STOP_DEADLINE_S) == 0, log()
    assert "every part stopped" in log()
    assert still_running(seen) == []


def test_the_children_start_in_dependency_order_and_stop_in_reverse() -> None:
    config = load_config(DEFAULT_CONFIG)
    specs = child_specs(config, DEFAULT_CONFIG, run_files(None), with_admin=True, with_producer=True)
    assert [s.name for s in specs] == ["queue-server", "pulsar", "manager", "master", "admin", "demo-producer"]
    master = specs[3]
    assert master.args[-2:] == ("--manager", "tcp://127.0.0.1:7500")
    assert master.stop_deadline_s > config.master.stop_deadline_s
    bare = child_specs(config, DEFAULT_CONFIG, run_files(None), with_admin=False, with_producer=False)
    assert [s.name for s in bare] == ["queue-server", "pulsar", "manager", "master"]
