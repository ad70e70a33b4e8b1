"""The `slotmap` console command: each package registers its own subcommands."""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from config.errors import ConfigError

# Each module defines `register(subparsers)`; the chosen subcommand's
# `func(args) -> int` runs. A module not written yet is simply absent.
COMMAND_MODULES = (
    "queue_server.server.cli",
    "queue_server.client.commands_cli",
    "queue_server.client.jobs_cli",
    "slot.cli",
    "master.cli",
    "master.reload_cli",
    "manager.cli",
    "manager.schedules.cli",
    "manager.reloading.config_reload_cli",
    "manager.hosts.hosts_cli",
    "slot.pulsar.cli",
    "slot.pulsar.limiters_cli",
    "slot.settings_cli",
    "manager.simulator.cli",
    "admin_ui.cli",
    "deploy.launcher",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slotmap", description="Slotmap cluster processing platform")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"slotmap: config error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
