"""The `slotmap` console command: each package registers its own subcommands."""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from config.errors import ConfigError

# Each module defines `register(subparsers)`; the chosen subcommand's
# `func(args) -> int` runs. A module not written yet is simply absent. Each subcommand is
# named here with its module so that `slotmap <command>` imports that module alone: every
# queue server, master and manager the tests or `slotmap run` start paid for importing all
# of them (tests/deploy/test_cli_commands.py checks the names against the modules).
COMMANDS: dict[str, str] = {
    "queue-server": "queue_server.server.cli",
    "put": "queue_server.client.commands_cli",
    "get": "queue_server.client.commands_cli",
    "stats": "queue_server.client.commands_cli",
    "jobs": "queue_server.client.jobs_cli",
    "job": "queue_server.client.jobs_cli",
    "result": "queue_server.client.jobs_cli",
    "retry": "queue_server.client.jobs_cli",
    "delete": "queue_server.client.jobs_cli",
    "cancel": "queue_server.client.jobs_cli",
    "demo-producer": "slot.cli",
    "master": "master.cli",
    "reload": "master.reload_cli",
    "manager": "manager.cli",
    "schedules": "manager.schedules.cli",
    "config-reload": "manager.reloading.config_reload_cli",
    "hosts": "manager.hosts.hosts_cli",
    "pulsar": "slot.pulsar.cli",
    "limiters": "slot.pulsar.limiters_cli",
    "queue-settings": "slot.settings_cli",
    "simulate": "manager.simulator.cli",
    "admin": "admin_ui.cli",
    "run": "deploy.launcher",
}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))


def build_parser(modules: Sequence[str] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """The parser with the subcommands of `modules` (all of them unless told)."""
    parser = argparse.ArgumentParser(prog="slotmap", description="Slotmap cluster processing platform")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """Only the named command's module when the first word names one; else all (help, errors)."""
    module = COMMANDS.get(argv[0]) if argv else None
    return build_parser((module,) if module is not None else COMMAND_MODULES)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    args = parser_for(words).parse_args(words)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"slotmap: config error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
