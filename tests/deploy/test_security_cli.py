"""Config and command-line mistakes that used to weaken a door silently or fail late (issue 10):
each is now a one-line error (exit 2, no traceback) before the process touches anything.

The commands are forked from one process that imported the CLI once (the `slotmap` fixture,
procs.CliForks): each is still a `slotmap` process of its own, without a Python start."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from procs import CliRun, free_port, to_toml

from config.errors import ConfigError
from config.load import parse_config

EXIT_CONFIG_ERROR = 2
# TEST-NET-1 (RFC 5737): never an address of this machine.
NOT_HERE = "192.0.2.1"


def refused(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == EXIT_CONFIG_ERROR, output
    assert "Traceback" not in output, output
    for needle in needles:
        assert needle in output, output


def write(folder: Path, sections: dict[str, dict[str, object]], *, top: str = "") -> Path:
    path = folder / "cluster.toml"
    path.write_text(top + to_toml(sections))
    return path


@pytest.mark.parametrize("listen, why", [
    ("tcp://999.1.1.1:7500", "is not an IPv4 address"),
    ("127.0.0.1:7500", "expected tcp://HOST:PORT"),
    ("tcp://127.0.0.1:99999", "port 1..65535"),
    (f"tcp://{NOT_HERE}:7500", "not an address of this machine"),
])
def test_a_bad_manager_listen_stops_it_before_the_lock_and_the_database(
    slotmap: CliRun, tmp_path: Path, listen: str, why: str,
) -> None:
    database = tmp_path / "var" / "slotmap.db"
    config = write(tmp_path, {"manager": {"listen": listen, "database_url": f"sqlite:///{database}"}})
    refused(slotmap("manager", "--config", str(config), cwd=tmp_path), "manager.listen", why)
    assert not (tmp_path / "var").exists(), list((tmp_path / "var").iterdir())


@pytest.mark.parametrize("listen, why", [
    ("bogus", "expected tcp://HOST:PORT"),
    (f"tcp://{NOT_HERE}:7510", "not an address of this machine"),
])
def test_a_bad_pulsar_listen_is_a_clear_error(
    slotmap: CliRun, tmp_path: Path, listen: str, why: str,
) -> None:
    refused(slotmap("pulsar", "--listen", listen, cwd=tmp_path), why)
    config = write(tmp_path, {"pulsar": {"listen": listen}})
    refused(slotmap("pulsar", "--config", str(config), cwd=tmp_path), "pulsar.listen", why)


def test_new_curve_secret_on_an_existing_file_is_a_clear_error_and_keeps_the_key(
    slotmap: CliRun, tmp_path: Path,
) -> None:
    secret = tmp_path / "cluster.secret"
    first = slotmap("manager", "--new-curve-secret", str(secret), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    key = secret.read_bytes()
    refused(slotmap("manager", "--new-curve-secret", str(secret), cwd=tmp_path), "already exists")
    assert secret.read_bytes() == key
    refused(slotmap("manager", "--new-curve-secret", str(tmp_path / "no" / "dir" / "s"), cwd=tmp_path),
            "cannot create")


def test_new_host_key_writes_a_public_and_an_owner_only_secret_certificate(
    slotmap: CliRun, tmp_path: Path,
) -> None:
    result = slotmap("manager", "--new-host-key", "alpha", "--keys-dir", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "public-key" in (tmp_path / "alpha.key").read_text()
    assert "secret-key" not in (tmp_path / "alpha.key").read_text()
    assert (tmp_path / "alpha.key_secret").stat().st_mode & 0o077 == 0
    refused(slotmap("manager", "--new-host-key", "alpha", "--keys-dir", str(tmp_path), cwd=tmp_path),
            "already exists")


def test_a_missing_curve_secret_file_is_a_clear_error_at_start(
    slotmap: CliRun, tmp_path: Path,
) -> None:
    config = write(tmp_path, {"manager": {"database_url": f"sqlite:///{tmp_path / 'var' / 'db'}"}},
                   top=f'curve_secret_file = "{tmp_path / "missing.secret"}"\n\n')
    refused(slotmap("manager", "--config", str(config), cwd=tmp_path), "no such file")
    assert not (tmp_path / "var").exists()
    refused(slotmap("pulsar", "--config", str(config), cwd=tmp_path), "no such file")


@pytest.mark.parametrize("admin, env, why", [
    ({"protect_reads": True}, {}, "protect_reads needs an admin token"),
    ({"token": "two words"}, {}, "visible ASCII without spaces"),
    ({"token": ""}, {}, "admin.token is empty"),
    ({}, {"SLOTMAP_ADMIN_TOKEN": ""}, "$SLOTMAP_ADMIN_TOKEN is empty"),
    ({}, {"SLOTMAP_ADMIN_TOKEN": "caf\u00e9"}, "visible ASCII"),
    ({"token_file": "/nonexistent/token"}, {}, "cannot be read"),
])
def test_admin_tokens_that_would_weaken_the_dashboard_stop_it(
    slotmap: CliRun, tmp_path: Path, admin: dict[str, object], env: dict[str, str], why: str,
) -> None:
    config = write(tmp_path, {"admin": {"listen": f"127.0.0.1:{free_port()}", **admin},
                              "manager": {"database_url": f"sqlite:///{tmp_path / 'db'}"}})
    refused(slotmap("admin", "--config", str(config), cwd=tmp_path, env=env), why)


def test_a_bad_admin_listen_flag_is_a_clear_error(slotmap: CliRun, tmp_path: Path) -> None:
    refused(slotmap("admin", "--listen", "999.1.1.1:8400", cwd=tmp_path), "--listen", "not an IPv4 address")
    refused(slotmap("admin", "--listen", f"{NOT_HERE}:8400", cwd=tmp_path), "not an address of this machine")


@pytest.mark.parametrize("raw, why", [
    ({"master": {"max_slots": 5000}}, "manager.max_message_bytes"),
    ({"curve_authorized_keys_dir": "/etc"}, "need curve_secret_file"),
    ({"pulsar": {"max_pause_s": 0}}, "max_pause_s"),
    ({"pulsar": {"listen": "tcp://*:7510"}}, None),
])
def test_config_checks_of_the_doors(raw: dict[str, object], why: str | None) -> None:
    if why is None:
        parse_config(raw)
        return
    with pytest.raises(ConfigError, match=why):
        parse_config(raw)
