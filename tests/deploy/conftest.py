"""Fixtures of the deploy tests: `slotmap` commands forked from one process per worker
(procs.CliForks), for the tests of what a command answers before it starts anything."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from polling import DEADLINE_S
from procs import CliForks, CliRun

# What the commands of these tests import, at the top of their modules or in their run
# functions: the fork server imports it once, so no command pays for it.
COMMAND_MODULES = (
    "manager.cli", "slot.pulsar.cli", "admin_ui.cli", "queue_server.server.cli",
    "config.load", "config.curve", "config.preflight", "config.endpoints",
    "manager.failover.leader", "manager.reloading.config_reload", "manager.storage.store",
    "slot.pulsar.service", "uvicorn", "admin_ui.app", "admin_ui.auth", "admin_ui.settings",
)


@pytest.fixture(scope="session")
def cli_forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliForks]:
    forks = CliForks(tmp_path_factory.mktemp("cli_output"), COMMAND_MODULES)
    yield forks
    forks.close()


@pytest.fixture
def slotmap(cli_forks: CliForks) -> CliRun:
    """slotmap(*args, cwd=folder, env=more variables) -> CompletedProcess (text output)."""
    def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return cli_forks.run(*args, cwd=cwd, env=env, timeout_s=DEADLINE_S)
    return run
