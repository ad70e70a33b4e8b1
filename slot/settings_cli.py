"""`slotmap queue-settings --config FILE`: each queue's settings in force, after the handler
classes are imported as the master imports them (the batch_size rule of slot/queue_settings.py)."""
from __future__ import annotations

import argparse
from collections.abc import Mapping

from config.models import ClusterConfig, QueueConfig
from slot.handler import Handler
from slot.queue_settings import batch_size_in_force, batch_size_source, conflicts


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "queue-settings",
        help="each queue's settings in force (config and handler class), as the master uses them",
    )
    parser.add_argument("--config", help="cluster config (TOML); its [master] handler_modules are imported")
    parser.set_defaults(func=run)


def rows(config: ClusterConfig, handlers: Mapping[str, type[Handler]]) -> list[str]:
    """One line per queue that has a config table or a handler (pure)."""
    lines = [f"{'queue':<24} {'handler':<36} {'batch_size':<18} {'lock_timeout_s':>14}  rate_limit"]
    for queue in sorted(set(config.queues) | set(handlers)):
        settings = config.queues.get(queue)
        handler = handlers.get(queue)
        limit = settings.rate_limit if settings is not None else None
        rate = f"{limit.permits}/{limit.period_s:g} s" if limit is not None else "-"
        lock = (settings or QueueConfig()).lock_timeout_s
        if handler is None:
            batch, name = "-", "(none: no slots)"
        else:
            batch = f"{batch_size_in_force(settings, handler)} ({batch_size_source(settings)})"
            name = f"{handler.__module__}.{handler.__qualname__}"
        lines.append(f"{queue:<24} {name:<36} {batch:<18} {lock:>14g}  {rate}")
    return lines


def run(args: argparse.Namespace) -> int:
    from config.load import load_config
    from slot.discovery import extend_sys_path, load_handlers

    config = load_config(args.config)
    extend_sys_path(config.master.python_path)
    loaded = load_handlers(config.master.handler_modules)
    print("\n".join(rows(config, loaded.handlers)))
    for conflict in conflicts(config.queues, loaded.handlers):
        print(f"note: {conflict.message()}")
    for source, error in loaded.failures.items():
        print(f"error: {source} failed to import: {error}")
    return 1 if loaded.failures else 0
