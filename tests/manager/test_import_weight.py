"""The manager imports the frames, not the master's arbiter or the slot's process (issue 11).

Each manager module is imported in a fresh interpreter; the test fails when that loaded the
master's or the slot's running machinery. The manager-link frames live in
master/manager_frames.py, apart from ManagedMaster (master/manager_link.py), for this.
"""
from __future__ import annotations

import pkgutil

import pytest
from procs import modules_loaded_by

import manager

HEAVY = ("master.arbiter", "master.supervisor", "slot.process", "slot.loop")
# Alembic's env script runs only inside `alembic upgrade` (it needs alembic's context).
NOT_IMPORTABLE_ALONE = {"manager.migrations.env"}


def manager_modules() -> list[str]:
    found = ["manager"] + [info.name for info in pkgutil.walk_packages(manager.__path__, "manager.")]
    return sorted(name for name in found if name not in NOT_IMPORTABLE_ALONE)


@pytest.mark.parametrize("module", manager_modules())
def test_a_manager_module_does_not_load_the_master_or_slot_machinery(module: str) -> None:
    assert modules_loaded_by(module, HEAVY) == [], f"import {module} loaded these"


def test_the_list_covers_the_simulator_and_the_link_to_the_masters() -> None:
    names = manager_modules()
    assert {"manager.simulator.simulate", "manager.planning.planner", "manager.hosts.link", "manager.service"} <= set(names)
