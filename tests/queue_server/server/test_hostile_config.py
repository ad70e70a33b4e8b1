"""The queue server's start-up refuses what no client could use, before anything is touched:
empty or unsendable tokens, listen addresses that cannot work; tokens come from a file or the
environment (never needing a command line that `ps` shows), for the server and for
`slotmap put/get/stats` alike."""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import psutil
import pytest
from polling import DEADLINE_S

from tests.conftest import HOST, RawClient, free_port, slotmap_command
from tests.queue_server.util import poll_until

REPO_ROOT = Path(__file__).resolve().parents[3]
TOKEN = "Env_T0ken-from.file"
RUN_S = 30.0


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOTMAP_QUEUE_TOKEN")}
    return dict(env, PYTHONPATH=str(REPO_ROOT), **extra)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*slotmap_command(), *args], capture_output=True, text=True,
                          timeout=RUN_S, env=env or _env(), check=False)


def _server_args(tmp_path: Path, port: int | None = None) -> list[str]:
    return ["queue-server", "--listen", f"{HOST}:{port or free_port()}",
            "--data-dir", str(tmp_path / "data")]


@pytest.mark.parametrize(("args", "config", "says"), [
    (["--token", ""], None, "empty"),
    (["--token", "two words"], None, "without spaces"),
    (["--token", "tab\there"], None, "without spaces"),
    ([], '[queue_server]\ntoken = "bell\\u0007"\n', "without spaces"),
    ([], '[queue_server]\ntoken = "a"\ntoken_file = "/nonexistent"\n', "not both"),
    (["--token-file", "/nonexistent/token"], None, "cannot be read"),
])
def test_an_unusable_token_stops_the_start_with_one_line_and_no_data_dir(tmp_path, args, config, says):
    extra = []
    if config is not None:
        (tmp_path / "c.toml").write_text(config)
        extra = ["--config", str(tmp_path / "c.toml")]
    result = _run(*_server_args(tmp_path), *args, *extra)
    assert result.returncode == 2
    assert says in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_an_empty_token_in_the_environment_is_refused_not_taken_for_none(tmp_path):
    result = _run(*_server_args(tmp_path), env=_env(SLOTMAP_QUEUE_TOKEN=""))
    assert result.returncode == 2 and "empty" in result.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(("listen", "code"), [("999.1.1.1:7400", 2), ("127.0.0.1:99999", 2),
                                               ("no host at all", 2)])
def test_a_bad_listen_address_is_refused_before_the_data_dir_is_made(tmp_path, listen, code):
    result = _run("queue-server", "--listen", listen, "--data-dir", str(tmp_path / "data"))
    assert result.returncode == code
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_a_taken_port_is_refused_before_the_data_dir_is_made(tmp_path):
    with socket.socket() as holder:
        holder.bind((HOST, 0))
        holder.listen()
        result = _run(*_server_args(tmp_path, holder.getsockname()[1]))
    assert result.returncode == 1 and "in use" in result.stderr
    assert not (tmp_path / "data").exists()


def _start(tmp_path: Path, *args: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    with open(tmp_path / "server.log", "wb") as log:
        process = subprocess.Popen([*slotmap_command(), *_server_args(tmp_path, port), *args],
                                   stdout=log, stderr=subprocess.STDOUT, env=env)
    poll_until(lambda: _accepts(port) or process.poll() is not None, timeout_s=DEADLINE_S,
               what="the server up")
    assert process.poll() is None, (tmp_path / "server.log").read_text()
    return process, port


def _accepts(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.2).close()
        return True
    except OSError:
        return False


def _requires(port: int, token: str) -> bool:
    client = RawClient(HOST, port)
    try:
        return (client.request(b"PING") == b"401 Auth Required"
                and client.request(f"AUTH {token}".encode()) == b"200 OK")
    finally:
        client.close()


@pytest.mark.parametrize("source", ["env", "env_file", "flag_file", "config_file"])
def test_the_token_comes_from_a_file_or_the_environment_and_never_shows_in_ps(tmp_path, source):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    env, args = _env(), []
    if source == "env":
        env = _env(SLOTMAP_QUEUE_TOKEN=TOKEN)
    elif source == "env_file":
        env = _env(SLOTMAP_QUEUE_TOKEN_FILE=str(token_file))
    elif source == "flag_file":
        args = ["--token-file", str(token_file)]
    else:
        (tmp_path / "c.toml").write_text(f'[queue_server]\ntoken_file = "{token_file}"\n')
        args = ["--config", str(tmp_path / "c.toml")]
    process, port = _start(tmp_path, *args, env=env)
    try:
        assert _requires(port, TOKEN)
        assert TOKEN not in " ".join(psutil.Process(process.pid).cmdline())
        assert TOKEN not in (tmp_path / "server.log").read_text()
    finally:
        process.kill()
        process.wait(timeout=10)


def test_put_get_and_stats_take_the_token_from_the_environment_or_a_file(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    process, port = _start(tmp_path, env=_env(SLOTMAP_QUEUE_TOKEN=TOKEN))
    server = ["--server", f"{HOST}:{port}"]
    try:
        assert _run("put", "q", "from-env", *server, env=_env(SLOTMAP_QUEUE_TOKEN=TOKEN)).returncode == 0
        assert _run("put", "q", "from-file", *server, "--token-file", str(token_file)).returncode == 0
        stats = _run("stats", *server, env=_env(SLOTMAP_QUEUE_TOKEN_FILE=str(token_file)))
        assert stats.returncode == 0 and "q" in stats.stdout
        got = _run("get", "q", "--count", "2", "--done", *server, env=_env(SLOTMAP_QUEUE_TOKEN=TOKEN))
        assert got.returncode == 0 and "from-env" in got.stdout and "from-file" in got.stdout
        refused = _run("stats", *server)
        assert refused.returncode == 1 and "401" in refused.stderr
        bad = _run("stats", *server, "--token", "two words")
        assert bad.returncode == 2 and "without spaces" in bad.stderr
    finally:
        process.kill()
        process.wait(timeout=10)
