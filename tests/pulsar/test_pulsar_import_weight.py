"""The pulsar sits below the slot: no pulsar module loads the slot, the master or the manager,
and what the `slotmap` parser, the limiter and the dashboard's vocabulary need loads no ZeroMQ."""
from __future__ import annotations

import pkgutil

import pytest
from procs import modules_loaded_by

import pulsar

ABOVE = ("slot", "master", "manager", "admin_ui")
# Every `slotmap` command builds every subcommand's parser, so pulsar.cli and
# pulsar.limiters_cli wait with ZeroMQ until they run.
LIGHT = ("pulsar.cli", "pulsar.errors", "pulsar.limiter", "pulsar.limiters_cli", "pulsar.protocol")


def pulsar_modules() -> list[str]:
    return sorted(["pulsar"] + [info.name for info in pkgutil.walk_packages(pulsar.__path__, "pulsar.")])


@pytest.mark.parametrize("module", pulsar_modules())
def test_a_pulsar_module_loads_nothing_of_the_layers_above(module: str) -> None:
    assert modules_loaded_by(module, ABOVE) == [], f"import {module} loaded these"


@pytest.mark.parametrize("module", LIGHT)
def test_the_pulsar_s_vocabulary_and_commands_load_no_zeromq(module: str) -> None:
    assert modules_loaded_by(module, ("zmq",)) == [], f"import {module} loaded these"


def test_the_list_covers_the_service_and_the_client() -> None:
    assert {"pulsar.service", "pulsar.client", *LIGHT} <= set(pulsar_modules())
