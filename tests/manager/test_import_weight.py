"""The manager imports the frames, not the master's arbiter or the slot's process (issue 11).

Each manager module is imported in a fresh interpreter; the test fails when that loaded the
master's or the slot's running machinery. The manager-link frames live in
master/manager_frames.py, apart from ManagedMaster (master/manager_link.py), for this.
"""
from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import manager

REPO_ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("master.arbiter", "master.supervisor", "slot.process", "slot.loop")
# Alembic's env script runs only inside `alembic upgrade` (it needs alembic's context).
NOT_IMPORTABLE_ALONE = {"manager.migrations.env"}
PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps([name for name in sys.argv[2:] if name in sys.modules]))
"""


def manager_modules() -> list[str]:
    found = ["manager"] + [info.name for info in pkgutil.walk_packages(manager.__path__, "manager.")]
    return sorted(name for name in found if name not in NOT_IMPORTABLE_ALONE)


@pytest.mark.parametrize("module", manager_modules())
def test_a_manager_module_does_not_load_the_master_or_slot_machinery(module: str) -> None:
    result = subprocess.run([sys.executable, "-c", PROBE, module, *HEAVY], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [], f"import {module} loaded these"


def test_the_list_covers_the_simulator_and_the_link_to_the_masters() -> None:
    names = manager_modules()
    assert {"manager.simulator.simulate", "manager.planner", "manager.link", "manager.service"} <= set(names)
