"""The handler code of a master: which modules are the app's, their version (a hash), and a
fresh import of them for a new generation of slots, undone if it fails.

Which modules are re-imported: those that importing the handler modules loaded first (not
the master's own, loaded before), whose source is a .py file outside the Python install
(stdlib, site-packages) and outside slotmap's packages (but a handler module named in the
config, e.g. slot.demo_handlers). Third-party libraries are not re-imported (numpy and most C
extensions cannot be imported twice in one process): upgrading one needs a master restart.
gunicorn's HUP without preload re-imports the app the same way, in fresh workers; here the
master imports once and its forks share the pages.

The version is a SHA-256 of those modules' names and source bytes (12 hex digits), so two
hosts that run the same files report the same version, and a reload whose files did not
change keeps its slots (retargets and settings in a SIGHUP still apply without a re-fork).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import site
import sys
import sysconfig
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from slot.discovery import LoadedHandlers, load_handlers
from slot.handler import Handler, registered_handlers, replace_registry

# slotmap's own packages: never re-imported (a second slot.handler would make a second Handler).
OWN_PACKAGES = frozenset({"slot", "master", "manager", "config", "queue_server", "admin_ui", "deploy"})
VERSION_CHARS = 12


def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.update(site.getsitepackages())
    return tuple(str(Path(root).resolve()) + "/" for root in roots)


def is_app_module(name: str, module: ModuleType | None, named: Collection[str]) -> bool:
    """True for a module of the app's own code (re-imported by a reload)."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str) or not file.endswith(".py"):
        return False
    if name.split(".", 1)[0] in OWN_PACKAGES and name not in named:
        return False
    return not str(Path(file).resolve()).startswith(_installed_roots())


def code_version(files: Mapping[str, str]) -> str:
    """SHA-256 of module name -> source file bytes, sorted by name; a missing file counts as
    empty (it will fail to import, which the reload reports)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        try:
            digest.update(Path(files[name]).read_bytes())
        except OSError:
            digest.update(b"\0missing\0")
    return digest.hexdigest()[:VERSION_CHARS]


@dataclass(frozen=True, slots=True)
class Code:
    """One generation's handler code: what was imported and its version."""

    loaded: LoadedHandlers
    # App module name -> its source file.
    files: Mapping[str, str]
    version: str

    def on_disk_version(self) -> str:
        """The version the same modules' files have now (differs once a deploy wrote them)."""
        return code_version(self.files)


def import_code(modules: Sequence[str], *, before: Collection[str]) -> Code:
    """Import the handler modules; the app modules are those not in `before`."""
    loaded = load_handlers(modules)
    files = {name: str(module.__file__) for name, module in list(sys.modules.items())
             if name not in before and is_app_module(name, module, modules)}
    return Code(loaded, files, code_version(files))


class ImportRefused(Exception):
    """Importing the new code raised past load_handlers' own boundary (SystemExit)."""


@dataclass(frozen=True, slots=True)
class Undo:
    """What a fresh import replaced, to put back if the new code is refused."""

    # The app modules taken out of sys.modules, and the names the fresh import added.
    removed: Mapping[str, ModuleType]
    added: frozenset[str]
    registry: Mapping[str, type[Handler]]

    def restore(self) -> None:
        for name in self.added:
            sys.modules.pop(name, None)
        sys.modules.update(self.removed)
        replace_registry(self.registry)


def reimport(current: Code, modules: Sequence[str]) -> tuple[Code, Undo]:
    """Forget the app's modules and handler classes, import `modules` afresh: the new Code and
    how to undo it. The old classes stay alive in the old slots (and in the master until
    their last slot is gone); new forks get the new ones."""
    removed = {name: sys.modules.pop(name) for name in list(current.files) if name in sys.modules}
    for file in current.files.values():
        _forget_bytecode(file)
    importlib.invalidate_caches()
    registry = registered_handlers()
    # A handler class of a module re-imported registers again; one whose module is gone from
    # the new code must not linger (its queue then gets no slots, as at a first start).
    replace_registry({queue: cls for queue, cls in registry.items() if cls.__module__ not in removed})
    before = set(sys.modules)
    try:
        code = import_code(modules, before=before)
    except (Exception, SystemExit) as exc:  # a module's sys.exit() at import must not end the master
        Undo(removed, frozenset(set(sys.modules) - before), registry).restore()
        raise ImportRefused(f"{type(exc).__name__}: {exc}") from exc
    return code, Undo(removed, frozenset(set(sys.modules) - before), registry)


def _forget_bytecode(source: str) -> None:
    """Drop a module's cached bytecode: Python trusts a .pyc whose recorded mtime (whole
    seconds) and size match the source, so a deploy that rewrites a file within the second
    it was compiled, at the same size, would otherwise re-import the old code."""
    with contextlib.suppress(OSError, ValueError):  # none cached, or no cache for this path
        os.unlink(importlib.util.cache_from_source(source))


def describe(failures: Mapping[str, str]) -> str:
    return "; ".join(f"{source}: {why}" for source, why in failures.items())
