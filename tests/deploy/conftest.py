"""Fixtures of the deploy tests: `slotmap` commands forked from one process per worker
(procs.CliForks), for the tests of what a command answers before it starts anything."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from polling import DEADLINE_S
from procs import CliForks, CliRun

# What each command of these tests imports, at the top of its module or in its run
# function: the fork server imports it at the command's first run, so no command pays again.
COMMAND_MODULES = {
    "admin": ("admin_ui.cli", "uvicorn", "admin_ui.app", "admin_ui.auth", "admin_ui.settings",
              "config.endpoints", "config.load", "config.preflight", "manager.storage.store"),
    "manager": ("manager.cli", "config.curve", "config.load", "config.preflight",
                "manager.failover.leader", "manager.reloading.config_reload"),
    "pulsar": ("slot.pulsar.cli", "config.load", "slot.pulsar.service"),
    "queue-server": ("queue_server.server.cli",),
}


@pytest.fixture(scope="session")
def cli_forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliForks]:
    forks = CliForks(tmp_path_factory.mktemp("cli_output"))
    yield forks
    forks.close()


@pytest.fixture
def slotmap(cli_forks: CliForks) -> CliRun:
    """slotmap(*args, cwd=folder, env=more variables) -> CompletedProcess (text output)."""
    def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return cli_forks.run(*args, cwd=cwd, env=env, timeout_s=DEADLINE_S,
                             modules=COMMAND_MODULES.get(args[0], ()))
    return run
