"""The pulsar sits below the rest of the slot: no pulsar module loads the slot's process, the
master or the manager (only `slot/__init__`, which loads the light `slot.handler`), and what
the `slotmap` parser, the limiter and the dashboard's vocabulary need loads no ZeroMQ."""
from __future__ import annotations

import functools
import pkgutil

import pytest
from procs import modules_loaded_by

import admin_ui
import manager
import master
import slot
import slot.pulsar

# Importing slot.pulsar runs slot/__init__, which exports the handler API.
PARENT_MODULES = {"slot", "slot.handler", "slot.errors"}
# Every `slotmap` command builds every subcommand's parser, so slot.pulsar.cli and
# slot.pulsar.limiters_cli wait with ZeroMQ until they run.
LIGHT = ("slot.pulsar.cli", "slot.pulsar.errors", "slot.pulsar.limiter",
         "slot.pulsar.limiters_cli", "slot.pulsar.protocol")


def pulsar_modules() -> list[str]:
    return sorted(["slot.pulsar", *(info.name for info in pkgutil.walk_packages(
        slot.pulsar.__path__, "slot.pulsar."))])


def modules_above() -> list[str]:
    names = [package.__name__ for package in (slot, master, manager, admin_ui)]
    for package in (slot, master, manager, admin_ui):
        names += [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(name for name in names
                  if name not in PARENT_MODULES and not name.startswith("slot.pulsar"))


ABOVE = modules_above()


@functools.cache
def loaded_by(module: str) -> frozenset[str]:
    """What of the layers above and ZeroMQ `import module` loads: one fresh interpreter per
    module serves both tests."""
    return frozenset(modules_loaded_by(module, [*ABOVE, "zmq"]))


@pytest.mark.parametrize("module", pulsar_modules())
def test_a_pulsar_module_loads_nothing_of_the_layers_above(module: str) -> None:
    assert sorted(loaded_by(module) & set(ABOVE)) == [], f"import {module} loaded these"


@pytest.mark.parametrize("module", LIGHT)
def test_the_pulsar_s_vocabulary_and_commands_load_no_zeromq(module: str) -> None:
    assert sorted(loaded_by(module) & {"zmq"}) == [], f"import {module} loaded these"


def test_the_list_covers_the_service_and_the_client() -> None:
    assert {"slot.pulsar.service", "slot.pulsar.client", *LIGHT} <= set(pulsar_modules())
