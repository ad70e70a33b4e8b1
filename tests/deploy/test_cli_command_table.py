"""`slotmap <command>` imports only the module of that command (deploy/cli.py COMMANDS):
the table must name exactly the subcommands each module registers."""
from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

from deploy.cli import COMMAND_MODULES, COMMANDS, parser_for


def _registered(module_name: str) -> set[str]:
    subparsers = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(module_name).register(subparsers)
    return set(subparsers.choices)


def test_the_command_table_names_what_each_module_registers() -> None:
    for module_name in COMMAND_MODULES:
        named = {command for command, module in COMMANDS.items() if module == module_name}
        assert _registered(module_name) == named, module_name


def test_a_named_command_gets_a_parser_of_its_own_and_anything_else_all_of_them() -> None:
    alone = parser_for(["queue-server", "--help"])._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(alone) == {"queue-server"}
    everything = parser_for(["--help"])._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(everything) == set(COMMANDS)


def test_starting_a_queue_server_imports_no_other_commands_module() -> None:
    code = ("import sys; from deploy.cli import parser_for; parser_for(['queue-server']); "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('master', 'manager', 'admin_ui', 'slot'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == []
