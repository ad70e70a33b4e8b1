"""A database password never reaches a command line, a log line or a file others may read:
`slotmap run`'s overview, `slotmap admin --database-url` and the derived config of
`slotmap run --replicas` (each failed before the audit branch, said per test)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from procs import REPO_ROOT, CliRun, free_port, pg_schema, poll_until, slotmap_command, to_toml
from sqlalchemy import make_url
from test_security_cli import EXIT_CONFIG_ERROR

from config.load import load_config, without_password
from config.paths import run_files
from deploy.launcher import DEFAULT_CONFIG, child_specs
from deploy.replicas import with_replicas, write_config

PASSWORD = "db-pass-word-77"
TOKEN = "derived-config-token-42"
URL = f"postgresql+psycopg://slotmap:{PASSWORD}@db.example:5432/slotmap"
DEADLINE_S = 60.0


@pytest.mark.parametrize(("url", "shown"), [
    (URL, "postgresql+psycopg://slotmap:***@db.example:5432/slotmap"),
    ("postgresql://slotmap@db/x", "postgresql://slotmap@db/x"),
    ("postgresql://u:p@ss@db/x", "postgresql://u:***@db/x"),
    ("u:secret@db/x", "***@db/x"),
    ("sqlite:///./var/slotmap.db", "sqlite:///./var/slotmap.db"),
])
def test_a_shown_url_keeps_everything_but_the_password(url: str, shown: str) -> None:
    assert without_password(url) == shown


def test_the_launchers_overview_names_the_database_without_its_password() -> None:
    """Before: the manager's line of 'the cluster is up' printed the whole URL."""
    config = load_config(DEFAULT_CONFIG)
    config = config.model_copy(update={"manager": config.manager.model_copy(update={"database_url": URL})})
    specs = child_specs(config, DEFAULT_CONFIG, run_files(None), with_admin=True, with_producer=True)
    manager = next(spec for spec in specs if spec.name == "manager")
    assert "slotmap:***@db.example:5432/slotmap" in manager.where
    for spec in specs:
        assert PASSWORD not in spec.where and PASSWORD not in " ".join(spec.args), spec


def test_the_dashboard_refuses_a_database_password_on_its_command_line(
    slotmap: CliRun, tmp_path: Path,
) -> None:
    """Before: it served, with the password in its argv for every local user's `ps`."""
    result = slotmap("admin", "--listen", f"127.0.0.1:{free_port()}", "--database-url", URL, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == EXIT_CONFIG_ERROR, output
    assert "--database-url holds a password" in output and "chmod 600" in output, output
    assert PASSWORD not in output and "Traceback" not in output, output


def test_the_derived_config_of_replicas_is_private_and_read_back(tmp_path: Path) -> None:
    """Before: written 0644 (over an older copy's mode too) with the token in it, so every
    child refused it and the token lay open to every local user."""
    private = tmp_path / "cluster.toml"
    private.write_text(to_toml({"queue_server": {"token": TOKEN}}))
    private.chmod(0o600)
    derived = with_replicas(load_config(private), 1)
    path = tmp_path / "derived.toml"
    path.write_text("left by an older run\n")
    path.chmod(0o644)
    assert write_config(derived, path) == path
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_config(path).queue_server.token == TOKEN


@contextlib.contextmanager
def database_with_password() -> Iterator[str]:
    """The test PostgreSQL with a password in its URL (a trusting server ignores it), in a
    schema of its own so that this manager's tables and lock touch no other test's."""
    dsn = os.environ.get("SLOTMAP_TEST_PG")
    if not dsn:
        pytest.skip("SLOTMAP_TEST_PG is not set")
    url = make_url(dsn)
    with pg_schema(url.set(password=url.password or PASSWORD).render_as_string(hide_password=False),
                   "slotmap_pw") as with_password:
        yield with_password


def test_a_running_cluster_shows_its_database_password_nowhere(tmp_path: Path) -> None:
    """`slotmap run` on PostgreSQL with a password: not in any process's argv, not in the
    launcher's output, not in any child's log. Before: the launcher printed it."""
    with database_with_password() as url:
        password = str(make_url(url).password)
        config = tmp_path / "cluster.toml"
        config.write_text(to_toml({
            "queue_server": {"listen": f"127.0.0.1:{free_port()}", "fsync": "never"},
            "queues.demo_noop": {"min_slots": 1, "max_slots": 1},
            "master": {"ipc_dir": "./var/ipc", "max_slots": 2, "max_load_per_cpu": 1000.0,
                       "stop_deadline_s": 5.0},
            "manager": {"listen": f"tcp://127.0.0.1:{free_port()}", "database_url": url,
                        "heartbeat_interval_s": 0.25, "plan_interval_s": 1.0},
            "pulsar": {"listen": f"tcp://127.0.0.1:{free_port()}"},
            "admin": {"listen": f"127.0.0.1:{free_port()}"},
        }))
        config.chmod(0o600)
        output = tmp_path / "run.out"
        with open(output, "wb") as out:
            launcher = subprocess.Popen(
                [*slotmap_command(), "run", "--config", str(config), "--no-producer"],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"},
            )
        manager_log = tmp_path / "var" / "log" / "manager.log"
        try:
            poll_until(lambda: "the cluster is up" in output.read_text() or launcher.poll() is not None,
                       timeout_s=DEADLINE_S, what=lambda: f"the cluster up\n{output.read_text()}")
            assert launcher.poll() is None, output.read_text()
            # The manager really works on that URL: it logs where its history goes.
            poll_until(lambda: "database postgresql" in manager_log.read_text(), timeout_s=DEADLINE_S,
                       what=lambda: f"the manager active\n{manager_log.read_text()}")
            processes = [psutil.Process(launcher.pid), *psutil.Process(launcher.pid).children(recursive=True)]
            for process in processes:
                with contextlib.suppress(psutil.NoSuchProcess):  # a slot may come and go
                    assert password not in " ".join(process.cmdline()), process
        finally:
            children = []
            with contextlib.suppress(psutil.NoSuchProcess):
                children = psutil.Process(launcher.pid).children(recursive=True)
            launcher.send_signal(signal.SIGTERM)
            try:
                launcher.wait(timeout=DEADLINE_S)
            finally:
                for child in [launcher, *children]:
                    with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                        os.kill(child.pid, signal.SIGKILL)
        for shown in [output, *sorted((tmp_path / "var" / "log").glob("*.log"))]:
            assert password not in shown.read_text(errors="replace"), f"{shown}:\n{shown.read_text()}"
        assert "***@" in output.read_text(), output.read_text()
