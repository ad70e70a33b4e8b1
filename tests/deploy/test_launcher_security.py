"""`slotmap run` (issue 10): a handler module that fails to import fails the start; the queue
server token reaches the demo producer through its environment, never its command line."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from procs import REPO_ROOT, free_port, poll_until, slotmap_command, to_toml

from queue_server.client import QueueClient

TOKEN = "launcher-secret-token-42"
DEADLINE_S = 60.0


def cluster_config(folder: Path, **master: object) -> tuple[Path, str]:
    """A demo cluster on free ports whose queue server token sits in a file (mode 0600)."""
    queue_address = f"127.0.0.1:{free_port()}"
    token_file = folder / "queue.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    config = folder / "cluster.toml"
    config.write_text(to_toml({
        "queue_server": {"listen": queue_address, "fsync": "never", "token_file": str(token_file)},
        "queues.demo_noop": {"min_slots": 1, "max_slots": 2},
        "master": {"ipc_dir": "./var/ipc", "max_slots": 4, "max_load_per_cpu": 1000.0,
                   "stop_deadline_s": 5.0, **master},
        "manager": {"listen": f"tcp://127.0.0.1:{free_port()}", "heartbeat_interval_s": 0.25,
                    "heartbeat_liveness": 4, "plan_interval_s": 1.0},
        "pulsar": {"listen": f"tcp://127.0.0.1:{free_port()}"},
        "admin": {"listen": f"127.0.0.1:{free_port()}"},
    }))
    return config, queue_address


@pytest.fixture
def run(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Launchers started by a test; each is SIGKILLed with everything it started."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for launcher in started:
        children = []
        with contextlib.suppress(psutil.NoSuchProcess):
            children = psutil.Process(launcher.pid).children(recursive=True)
        for process in [launcher, *children]:
            with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                os.kill(process.pid, signal.SIGKILL)
        launcher.wait(timeout=10)


def start(run: list[subprocess.Popen[bytes]], folder: Path, config: Path, *args: str) -> Path:
    output = folder / "run.out"
    with open(output, "wb") as out:
        run.append(subprocess.Popen(
            [*slotmap_command(), "run", "--config", str(config), *args],
            stdout=out, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"},
        ))
    return output


def test_a_handler_module_that_fails_to_import_fails_the_start(
    run: list[subprocess.Popen[bytes]], tmp_path: Path,
) -> None:
    config, _ = cluster_config(tmp_path, handler_modules=["slotmap_no_such_handlers_module"])
    output = start(run, tmp_path, config, "--no-producer")
    code = run[0].wait(timeout=DEADLINE_S)
    text = output.read_text(errors="replace")
    assert code == 1, text
    assert "the cluster is up" not in text
    assert re.search(r"master \(pid \d+\) could not import its handlers \(module "
                     r"slotmap_no_such_handlers_module: ModuleNotFoundError", text), text
    assert "stopping the others" in text


def test_a_token_file_others_may_read_stops_the_start_before_any_child(
    run: list[subprocess.Popen[bytes]], tmp_path: Path,
) -> None:
    """The dashboard, started last, refused its viewer token file after 'the cluster is up'
    and took every other part down with it: now nothing starts."""
    config, _ = cluster_config(tmp_path)
    viewer = tmp_path / "viewer.token"
    viewer.write_text("viewer-secret-token-42\n")
    viewer.chmod(0o644)
    config.write_text(config.read_text() + f'viewer_token_file = "{viewer}"\n')  # [admin] is last
    output = start(run, tmp_path, config, "--no-producer")
    code = run[0].wait(timeout=DEADLINE_S)
    text = output.read_text(errors="replace")
    assert code != 0 and f"run `chmod 600 {viewer}`" in text, text
    assert "started" not in text and "viewer-secret-token-42" not in text


def test_the_queue_token_is_in_the_producers_environment_not_its_command_line(
    run: list[subprocess.Popen[bytes]], tmp_path: Path,
) -> None:
    # Started from another folder than the config's (issue 26 point 8): what `slotmap run`
    # writes (logs, tokens, the master's report) lands beside the config, as its data does.
    app, shell = tmp_path / "app", tmp_path / "shell"
    app.mkdir()
    shell.mkdir()
    config, queue_address = cluster_config(app)
    output = start(run, shell, config)

    def log() -> str:
        return output.read_text(errors="replace")

    poll_until(lambda: "the cluster is up" in log() or run[0].poll() is not None, timeout_s=DEADLINE_S,
               what=lambda: f"the cluster up\n{log()}")
    assert run[0].poll() is None, log()
    assert sorted(path.name for path in shell.iterdir()) == ["run.out"], "written in the shell's folder"
    pids = {name: int(pid) for name, pid in re.findall(r"started (\S+) \(pid (\d+)\)", log())}
    for name, pid in pids.items():
        assert TOKEN.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes(), name
    # Least privilege (issue 29): each role's token generated once, private to its owner; the
    # producer is handed the producer's, never the admin's.
    tokens = {role: app / "var" / "run" / "tokens" / f"{role}.token"
              for role in ("producer", "worker", "operator", "cluster")}
    for path in tokens.values():
        assert path.stat().st_mode & 0o777 == 0o600, path
    producer_token = tokens["producer"].read_text().strip()
    environ = Path(f"/proc/{pids['demo-producer']}/environ").read_bytes().split(b"\0")
    assert f"SLOTMAP_QUEUE_TOKEN={producer_token}".encode() in environ
    assert not any(TOKEN.encode() in entry for entry in environ)
    # And the producer really authenticates with it: its jobs arrive, and the slots (the
    # worker's token, from the master) run them.
    with QueueClient(queue_address, token=producer_token, timeout_s=5.0) as client:
        poll_until(lambda: client.stats().get("demo_noop") and client.stats()["demo_noop"].done > 0,
                   timeout_s=30.0, what=lambda: f"demo jobs put and done\n{log()}")
    assert _replies(queue_address, f"AUTH {producer_token}\r\nOFFLINE\r\n") == [
        b"200 OK", b"403 Forbidden: OFFLINE needs the admin role"]
    # The manager read the same file: it planned on the queue server's figures.
    manager_log = app / "var" / "log" / "manager.log"
    poll_until(lambda: "demo_noop: +" in manager_log.read_text(), timeout_s=30.0,
               what=lambda: f"a plan\n{manager_log.read_text()}")
    assert "stats unavailable" not in manager_log.read_text(), manager_log.read_text()

    # With the cluster up (issue 27): SIGHUP to `slotmap run` (`systemctl reload`) reloads the
    # master's code, the manager's config and the pulsar's limits, and stops nothing (it ended the launcher, and the cluster with it), and
    # `slotmap reload` finds the master through the launcher's report file.
    # The file is edited first: the children run on the file `slotmap run` derives from it,
    # derived again at the SIGHUP.
    config.write_text(config.read_text().replace("max_slots = 2", "max_slots = 3"))
    run[0].send_signal(signal.SIGHUP)
    master_log = app / "var" / "log" / "master.log"
    poll_until(lambda: "handler code unchanged" in master_log.read_text(), timeout_s=30.0,
               what=lambda: f"the master's reload\n{log()}\n{master_log.read_text()}")
    assert "SIGHUP to the master" in log() and run[0].poll() is None
    # The manager and the pulsar read the config again too (a config change needed a restart).
    for name, reloaded in (("manager", "queues.demo_noop.max_slots: 2 -> 3"), ("pulsar", "limits reloaded")):
        child_log = app / "var" / "log" / f"{name}.log"
        poll_until(lambda: reloaded in child_log.read_text(), timeout_s=30.0,  # noqa: B023
                   what=lambda: f"the {name}'s reload\n{log()}\n{child_log.read_text()}")  # noqa: B023
    # From the shell's folder, `slotmap reload` finds the report through the same config.
    answer = subprocess.run([*slotmap_command(), "reload", "--timeout-s", "30"], cwd=shell,
                            env={**os.environ, "SLOTMAP_CONFIG": str(config)},
                            capture_output=True, text=True, timeout=60)
    assert answer.returncode == 0 and "handler code unchanged" in answer.stdout, answer
    assert run[0].poll() is None, log()


def _replies(address: str, requests: str, count: int = 2) -> list[bytes]:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10.0) as sock:
        sock.sendall(requests.encode())
        data = b""
        while data.count(b"\r\n") < count:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n")[:count]
