"""What each process the platform starts does not import (issue 30: the suite's CPU goes to
starting processes). Each entry is imported in a fresh interpreter; the test fails when it
loaded one of the libraries or packages it does not need, as measured in bench/RESULTS.md
("Start-up CPU"): asyncio costs a blocking client 0.05 s, alembic the dashboard 0.2 s, the
command parser a client that only reads replies 0.03 s."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.bytecode import REPO_ROOT

PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps([name for name in sys.argv[2:] if name in sys.modules]))
"""
SERVERS = ("manager", "admin_ui", "alembic", "sqlalchemy", "fastapi")
NOT_LOADED_BY = {
    # The blocking client: slots, masters, `slotmap put/get/stats/jobs`.
    "queue_server.client": ("asyncio", "queue_server.protocol.commands", "queue_server.server",
                            *SERVERS),
    "queue_server.client.commands_cli": ("asyncio", "queue_server.protocol.commands", *SERVERS),
    "queue_server.server.cli": ("zmq", "master", "slot", *SERVERS),
    "master.cli": ("asyncio", "queue_server.server", *SERVERS),
    "slot.cli": ("asyncio", "queue_server.server", "master", *SERVERS),
    # The dashboard reads the manager's store; only the manager migrates it.
    "admin_ui.app": ("alembic", "mako", "queue_server.server"),
    # `slotmap <command>` imports the command's module when it runs, not before.
    "deploy.cli": ("pydantic", "asyncio", "zmq", "queue_server", "master", "slot", *SERVERS),
}


def loaded(module: str, candidates: tuple[str, ...]) -> list[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, module, *candidates], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    names: list[str] = json.loads(result.stdout)
    return names


@pytest.mark.parametrize("module", sorted(NOT_LOADED_BY))
def test_a_process_start_imports_nothing_it_does_not_need(module: str) -> None:
    assert loaded(module, NOT_LOADED_BY[module]) == [], f"import {module} loaded these"


def test_the_probe_sees_what_a_module_loads() -> None:
    assert loaded("queue_server.client.aio", ("asyncio", "alembic")) == ["asyncio"]
