"""The manager imports the frames, not the master's arbiter or the slot's process (issue 11).

Each manager module is imported on a sys.modules holding no code of the repository (one
interpreter forks a child per module: tests/procs.py); the test fails when that loaded the
master's or the slot's running machinery. The manager-link frames live in
master/manager_frames.py, apart from ManagedMaster (master/manager_link.py), for this.
"""
from __future__ import annotations

import pkgutil

import pytest
from procs import modules_loaded_by_each

import manager

HEAVY = ("master.arbiter", "master.supervisor", "slot.process", "slot.loop")
# Alembic's env script runs only inside `alembic upgrade` (it needs alembic's context).
NOT_IMPORTABLE_ALONE = {"manager.migrations.env"}


def manager_modules() -> list[str]:
    found = ["manager"] + [info.name for info in pkgutil.walk_packages(manager.__path__, "manager.")]
    return sorted(name for name in found if name not in NOT_IMPORTABLE_ALONE)


@pytest.fixture(scope="module")
def loaded_by_module() -> dict[str, list[str]]:
    return modules_loaded_by_each(manager_modules(), HEAVY)


@pytest.mark.parametrize("module", manager_modules())
def test_a_manager_module_does_not_load_the_master_or_slot_machinery(
    module: str, loaded_by_module: dict[str, list[str]],
) -> None:
    assert loaded_by_module[module] == [], f"import {module} loaded these"


def test_the_list_covers_the_simulator_and_the_link_to_the_masters() -> None:
    names = manager_modules()
    assert {"manager.simulator.simulate", "manager.planning.planner", "manager.hosts.link", "manager.service"} <= set(names)
