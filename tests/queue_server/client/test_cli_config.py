"""One config for every command (issue 26 point 8): `slotmap put/stats/job` find the queue
server and its token in `--config` or $SLOTMAP_CONFIG, and a config's relative paths name
places beside the file whatever folder a process starts in. Real server, real CLI."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import free_port, kill_session, slotmap_command, spawn_slotmap, to_toml, wait_listening

from config.load import load_config

TOKEN = "s3cret-token-of-the-file"
COMMAND_DEADLINE_S = 30.0


def write_cluster(folder: Path, port: int) -> Path:
    folder.mkdir(parents=True)
    (folder / "secret").mkdir()
    token_file = folder / "secret" / "queue.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    config = folder / "cluster.toml"
    config.write_text(to_toml({
        "queue_server": {"listen": f"127.0.0.1:{port}", "fsync": "never", "data_dir": "var/queue",
                         "token_file": "secret/queue.token"},
        "manager": {"database_url": "sqlite:///var/slotmap.db"},
        "master": {"python_path": ["handlers"]},
    }))
    return config


@pytest.fixture
def cluster_file(tmp_path: Path) -> Iterator[Path]:
    """A queue server started from a config in etc/ by a shell whose folder is elsewhere."""
    elsewhere = tmp_path / "shell"
    elsewhere.mkdir()
    for _ in range(3):
        port = free_port()
        config = write_cluster(tmp_path / f"etc-{port}", port)
        log_path = tmp_path / f"queue-server-{port}.log"
        process = spawn_slotmap(["queue-server", "--config", str(config)], log_path=log_path, cwd=elsewhere)
        try:
            if wait_listening(process, port, log_path, what="the queue server"):
                yield config
                return
        finally:
            kill_session(process)
    pytest.fail("no free port for the queue server in 3 tries")


def slotmap(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*slotmap_command(), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=COMMAND_DEADLINE_S, env=dict(os.environ, **(env or {})), check=False)


def test_relative_paths_resolve_against_the_config_files_folder(tmp_path: Path) -> None:
    config = write_cluster(tmp_path / "etc", 7400)
    loaded = load_config(config)
    folder = config.parent
    assert loaded.queue_server.data_dir == str(folder / "var" / "queue")
    assert loaded.queue_server.token_file == str(folder / "secret" / "queue.token")
    assert loaded.manager.database_url == f"sqlite:///{folder / 'var' / 'slotmap.db'}"
    assert loaded.master.python_path == [str(folder / "handlers")]
    # An absolute path stays as written; --config paths_against (slotmap run's embedded file)
    # makes them the current folder's.
    assert load_config(config, paths_against=tmp_path).queue_server.data_dir == str(tmp_path / "var" / "queue")


def test_client_commands_take_the_server_and_token_from_the_config(cluster_file: Path, tmp_path: Path) -> None:
    shell = tmp_path / "shell"
    # The data folder is beside the file, not in the shell's folder.
    assert (cluster_file.parent / "var" / "queue").is_dir()
    assert not (shell / "var").exists()
    put = slotmap("put", "mail", "hello", "--key", "k1", "--config", str(cluster_file), cwd=shell)
    assert (put.returncode, put.stdout.strip()) == (0, "k1"), put.stderr
    # $SLOTMAP_CONFIG does the same for every command.
    env = {"SLOTMAP_CONFIG": str(cluster_file)}
    stats = slotmap("stats", "mail", cwd=shell, env=env)
    assert stats.returncode == 0 and "mail" in stats.stdout, stats.stderr
    job = slotmap("job", "k1", cwd=shell, env=env)
    assert job.returncode == 0 and "state: ready" in job.stdout, job.stdout + job.stderr
    # The flags win over the file: a wrong token given on purpose is refused.
    refused = slotmap("stats", "--token-file", str(tmp_path / "wrong.token"), cwd=shell, env=env)
    assert refused.returncode != 0
    # A config that is not there says so, and the exit code is a usage error.
    missing = slotmap("stats", "--config", str(tmp_path / "nope.toml"), cwd=shell)
    assert missing.returncode == 2 and "no such config file" in missing.stderr
    # Without a token the server refuses: the token did come from the file.
    bare = slotmap("stats", "--server", f"127.0.0.1:{load_config(cluster_file).queue_server.listen.rsplit(':', 1)[1]}",
                   cwd=shell)
    assert bare.returncode == 1, bare.stdout + bare.stderr
