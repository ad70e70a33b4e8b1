"""Issue 16, break 15: a token file, a CURVE secret or a config holding a token that other
users may read is refused at start with the chmod that fixes it (config/secret_files.py).
The refusals fail on f5016ee, which started with at most a warning (said per test)."""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
import zmq
from procs import CliRun, free_port
from test_security_cli import EXIT_CONFIG_ERROR

from config.errors import ConfigError
from config.load import load_config
from config.tokens import read_token_file
from deploy.launcher import DEFAULT_CONFIG

TOKEN = "secret-files-token-42"


def write(path: Path, text: str, mode: int) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def refused_with_chmod(result: subprocess.CompletedProcess[str], path: Path, mode: int) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == EXIT_CONFIG_ERROR, output
    assert "Traceback" not in output, output
    assert f"(mode {mode:04o}): run `chmod 600 {shlex.quote(str(path))}`" in output, output


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620], ids=lambda mode: f"{mode:04o}")
def test_a_queue_token_file_others_can_open_stops_the_queue_server(
    slotmap: CliRun, tmp_path: Path, mode: int,
) -> None:
    """On f5016ee: a warning, then the server served."""
    token_file = write(tmp_path / "queue token", TOKEN + "\n", mode)
    result = slotmap("queue-server", "--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "q"),
                     "--token-file", str(token_file), cwd=tmp_path)
    refused_with_chmod(result, token_file, mode)


def test_an_admin_token_file_others_can_read_stops_the_dashboard(
    slotmap: CliRun, tmp_path: Path,
) -> None:
    """On f5016ee: no word, the dashboard served."""
    token_file = write(tmp_path / "admin.token", TOKEN + "\n", 0o644)
    config = write(tmp_path / "cluster.toml", f'[admin]\nlisten = "127.0.0.1:{free_port()}"\n'
                   f'token_file = "{token_file}"\n[manager]\ndatabase_url = "sqlite:///{tmp_path / "db"}"\n', 0o644)
    refused_with_chmod(slotmap("admin", "--config", str(config), cwd=tmp_path), token_file, 0o644)


def test_a_curve_secret_others_can_read_stops_the_manager(slotmap: CliRun, tmp_path: Path) -> None:
    """On f5016ee: no word, the manager took its lock and served."""
    secret = write(tmp_path / "cluster.secret", zmq.curve_keypair()[1].decode() + "\n", 0o644)
    config = write(tmp_path / "cluster.toml", f'curve_secret_file = "{secret}"\n[manager]\n'
                   f'listen = "tcp://127.0.0.1:{free_port()}"\ndatabase_url = "sqlite:///{tmp_path / "db"}"\n',
                   0o644)
    refused_with_chmod(slotmap("manager", "--config", str(config), cwd=tmp_path), secret, 0o644)
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize(("command", "section", "held"), [
    ("queue-server", '[queue_server]\ntoken = "{token}"\nlisten = "127.0.0.1:{port}"\ndata_dir = "q"\n',
     "queue_server.token"),
    ("admin", '[admin]\ntoken = "{token}"\nlisten = "127.0.0.1:{port}"\n', "admin.token"),
    ("manager", '[manager]\ndatabase_url = "postgresql+psycopg://slotmap:{token}@127.0.0.1:{port}/x"\n',
     "the password in manager.database_url"),
])
def test_a_config_holding_a_secret_that_others_can_read_is_refused(
    slotmap: CliRun, tmp_path: Path, command: str, section: str, held: str,
) -> None:
    """On f5016ee: no word; each process served (the manager waited for its database)."""
    config = write(tmp_path / "cluster.toml", section.format(token=TOKEN, port=free_port()), 0o644)
    result = slotmap(command, "--config", str(config), cwd=tmp_path)
    refused_with_chmod(result, config, 0o644)
    assert held in result.stderr and TOKEN not in result.stderr


def test_private_files_and_configs_without_secrets_are_read(tmp_path: Path) -> None:
    token_file = write(tmp_path / "token", TOKEN + "\n", 0o600)
    assert read_token_file(token_file) == TOKEN
    assert read_token_file(write(tmp_path / "ro-token", TOKEN, 0o400)) == TOKEN
    open_config = write(tmp_path / "open.toml", f'[queue_server]\ntoken_file = "{token_file}"\n', 0o644)
    assert load_config(open_config).queue_server.token_file == str(token_file)
    private = write(tmp_path / "private.toml", f'[admin]\ntoken = "{TOKEN}"\n', 0o600)
    assert load_config(private).admin.token == TOKEN
    with pytest.raises(ConfigError, match=r"holds admin\.token and"):
        load_config(write(tmp_path / "group.toml", f'[admin]\ntoken = "{TOKEN}"\n', 0o640))


def test_the_demo_config_of_make_run_holds_no_secret_and_loads_as_shipped() -> None:
    """`make run` out of the box: the shipped config is 0644 in a checkout, and needs no chmod."""
    assert load_config(DEFAULT_CONFIG).queue_server.token is None
