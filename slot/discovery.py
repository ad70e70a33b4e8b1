"""Import handler modules (config paths and the `slotmap.handlers` entry points) and collect them."""
from __future__ import annotations

import importlib
import logging
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import entry_points

from slot.handler import Handler, registered_handlers
from slot.setup_notes import describe

ENTRY_POINT_GROUP = "slotmap.handlers"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoadedHandlers:
    handlers: Mapping[str, type[Handler]]
    # Source ("module x" / "entry point demo (x)") -> one-line error; the traceback is logged.
    failures: Mapping[str, str]
    # Source -> the traceback's last lines (the host report's start_failures, slot/setup_notes.py).
    tracebacks: Mapping[str, str] = field(default_factory=dict)


def extend_sys_path(folders: Sequence[str]) -> None:
    """Put `folders` (master.python_path, made absolute by config.load) at the front of
    sys.path, in order, so handler_modules import the same from any start folder."""
    for folder in reversed(folders):
        if folder not in sys.path:
            sys.path.insert(0, folder)


def load_handlers(
    modules: Sequence[str], *, entry_point_group: str | None = ENTRY_POINT_GROUP
) -> LoadedHandlers:
    """Import every handler module; a module that fails is reported, the others still load.

    One broken module must not take every queue of the host down with it: its queues
    get no slots, and the failure is logged and carried in the host report.
    """
    failures: dict[str, str] = {}
    tracebacks: dict[str, str] = {}
    for name in modules:
        _import(f"module {name}", partial(importlib.import_module, name), failures, tracebacks)
    if entry_point_group:
        for point in entry_points(group=entry_point_group):
            _import(f"entry point {point.name} ({point.value})", point.load, failures, tracebacks)
    return LoadedHandlers(handlers=registered_handlers(), failures=failures, tracebacks=tracebacks)


def _import(source: str, load: Callable[[], object], failures: dict[str, str],
            tracebacks: dict[str, str]) -> None:
    try:
        load()
    # Any import-time error of user code is reported, sys.exit() too: a module that parses
    # the command line at import (argparse meeting the master's own arguments) ended the
    # master at its start with exit code 2 and only argparse's usage line, no queue served.
    except (Exception, SystemExit) as exc:
        summary = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, SystemExit):
            summary += " (sys.exit() at import: a command line parsed there?)"
        failures[source] = summary
        tracebacks[source] = describe(exc).traceback
        log.error(
            "handler %s failed to import (%s); its queues get no slots until it is fixed "
            "and the master restarted\n%s",
            source,
            summary,
            "".join(traceback.format_exception(exc)),
        )
