"""`slotmap run --replicas 1` (issue 17, 6): the demo cluster with a replica beside the
primary in sync mode. The primary queue server killed with SIGKILL: the manager promotes
the replica, the launcher starts the dead one again and it follows the new primary, and
a PUT is acknowledged by the promoted replica. Real processes."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from procs import REPO_ROOT, import_by_path, poll_until, to_toml

from config.load import load_config
from deploy.launcher import DEFAULT_CONFIG, RESTART_MIN_UPTIME_S
from queue_server.client import QueueClient
from tests.queue_server import server_proc

# A bench module (imported by path, as tests/slot/test_rate_limit_outside_api.py does):
# its process_group is the one start-and-stop of a process session for both.
end_to_end = import_by_path("sm_bench_end_to_end", REPO_ROOT / "bench" / "end_to_end.py")
STEP_S = 60.0  # each step's deadline: generous, for a loaded machine


def _port_pair() -> int:
    """A free port whose next one is free too (the replica listens on port + 1).

    Both taken from free_port(), which hands out ports in order: a port only probed here
    would be the very next one free_port() hands out (to the manager, say).
    """
    for _ in range(50):
        port = server_proc.free_port()
        if server_proc.free_port() == port + 1:
            return port
    raise RuntimeError("no two free ports in a row")


def _role(address: str) -> list[str]:
    """ROLE's words after `200 OK` (role, sync, links, released, epoch, lease, ...); [] if
    the server does not answer."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2.0) as sock:
            sock.sendall(b"ROLE\r\n")
            words = sock.makefile("rb").readline().decode().split()
    except OSError:
        return []
    return words[2:] if words[:2] == ["200", "OK"] else []


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, str, str]]:
    """`slotmap run --replicas 1 --no-producer` in tmp_path; its session SIGTERMed, then
    SIGKILLed, at the end."""
    port = _port_pair()
    primary, replica = f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"
    default = load_config(DEFAULT_CONFIG)
    config = tmp_path / "cluster.toml"
    config.write_text(to_toml({
        "queue_server": {"listen": primary, "fsync": "never"},
        **{f"queues.{name}": q.model_dump(exclude_unset=True) for name, q in default.queues.items()},
        "master": {"ipc_dir": "./var/ipc", "max_slots": 4, "max_load_per_cpu": 1000.0,
                   "stop_deadline_s": 5.0},
        "manager": {"listen": f"tcp://127.0.0.1:{server_proc.free_port()}"},
        "pulsar": {"listen": f"tcp://127.0.0.1:{server_proc.free_port()}"},
        "admin": {"listen": f"127.0.0.1:{server_proc.free_port()}"},
    }))
    output = tmp_path / "run.out"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    command = [*server_proc.slotmap_command(), "run", "--config", str(config), "--replicas", "1",
               "--no-producer"]
    # SIGTERM first: `slotmap run` stops its parts in order (30 s on a loaded machine).
    with end_to_end.process_group(command, env=env, log=output, cwd=tmp_path, stop_deadline_s=30.0) as launcher:
        yield launcher, output, primary, replica


def test_the_primarys_kill_promotes_the_replica_which_acknowledges_a_put(
    launched: tuple[subprocess.Popen[bytes], Path, str, str],
) -> None:
    launcher, output, primary, replica = launched

    def log() -> str:
        return output.read_text(errors="replace")

    poll_until(lambda: "the cluster is up" in log() or launcher.poll() is not None, timeout_s=STEP_S,
               what=lambda: f"the cluster up\n{log()}")
    assert launcher.poll() is None, log()
    # Leased by the manager, its replica in sync: what a failover needs.
    poll_until(lambda: (r := _role(primary))[:1] == ["primary"] and r[5] == "held" and r[2] == "1",
               timeout_s=STEP_S, what=lambda: f"the primary leased with its replica: {_role(primary)}")
    pid = int(re.findall(r"started queue-server \(pid (\d+)\)", log())[0])
    # A queue server dead sooner after its start is a crash loop to the launcher (it stops
    # everything); leased with its replica in sync can come sooner than that. 3 s of room:
    # the launcher starts its clock after Popen returned, which a loaded box can hold back.
    started = psutil.Process(pid).create_time()
    poll_until(lambda: time.time() - started > RESTART_MIN_UPTIME_S + 3.0, timeout_s=STEP_S,
               what="the queue server up longer than a crash loop")
    os.kill(pid, signal.SIGKILL)

    poll_until(lambda: (r := _role(replica))[:1] == ["primary"] and int(r[4]) >= 2 and r[5] == "held",
               timeout_s=STEP_S, what=lambda: f"the replica promoted: {_role(replica)}\n{log()}")
    with QueueClient([primary, replica], timeout_s=STEP_S, offline_wait_s=STEP_S) as client:
        client.put("failover_probe", b"after the kill", key="after-the-kill")
    with QueueClient(replica, timeout_s=STEP_S) as promoted:
        assert promoted.job("after-the-kill") is not None
    # The launcher went on, and the dead server came back as the new primary's replica.
    assert launcher.poll() is None, log()
    assert "started again" in log()
    poll_until(lambda: (r := _role(primary))[:1] == ["replica"] and int(r[4]) >= 2,
               timeout_s=STEP_S, what=lambda: f"the old primary following: {_role(primary)}")
