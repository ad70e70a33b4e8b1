"""No import circle anywhere in the product code (issue 30, point 3), and config/ is the
ground floor: it imports no other package of ours (point 2).

Every import of every module counts: at the top, inside functions, under TYPE_CHECKING (a
circle of types is still a circle of understanding), absolute or relative. A node is a
module (a package's __init__ is the package's name); `from pkg import name` is an edge to
pkg.name when that is a module, else to pkg. A circle found is printed as the path that
closes it.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("queue_server", "manager", "master", "slot", "admin_ui", "config", "deploy")


def product_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the product packages."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            if "migrations" in parts:  # alembic loads these by path, nothing imports them
                continue
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every dotted name `module` imports, anywhere in its source, as written (absolute)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def graph() -> dict[str, set[str]]:
    modules = product_modules()
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {imported for imported in imported_names(name, path) if imported in modules}
        # `from pkg import module` names pkg too: the edge that counts is the module's.
        targets -= {t for t in targets if any(o.startswith(t + ".") for o in targets)}
        edges[name] = targets - {name}
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path (its first module again at the end), or None."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt in on_path:
                return [*path[path.index(nxt):], nxt]
            if nxt not in done:
                cycle = visit(nxt)
                if cycle is not None:
                    return cycle
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for node in sorted(edges):
        if node not in done:
            cycle = visit(node)
            if cycle is not None:
                return cycle
    return None


def test_the_product_code_imports_in_no_circle() -> None:
    edges = graph()
    assert len(edges) > 200 and edges["slot.permits"], "the graph reads no imports: the parser is wrong"
    cycle = find_cycle(edges)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_config_imports_no_other_package_of_ours() -> None:
    upward = {f"{name} -> {target}" for name, targets in graph().items() if name.startswith("config")
              for target in targets if not target.startswith("config")}
    assert not upward, f"config/ is the ground floor: {sorted(upward)}"


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("""
from typing import TYPE_CHECKING
import slot.handler
from slot import permits
from . import limiter
from .pulsar.client import PermitClient
if TYPE_CHECKING:
    from master.arbiter import Arbiter
def later() -> None:
    from config.models import QueueConfig
""")
    names = set(imported_names("slot.m", source))
    assert {"slot.handler", "slot.permits", "slot.limiter", "slot.pulsar.client",
            "master.arbiter", "config.models"} <= names


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


# The manager's rooms, lowest first: a room imports only rooms below it (issue 30, point 1).
MANAGER_ROOMS = ("storage", "events", "planning", "hosts", "failover", "reloading", "schedules",
                 "simulator", "service", "cli")


def test_the_managers_rooms_import_one_way() -> None:
    rank = {room: index for index, room in enumerate(MANAGER_ROOMS)}
    upward = set()
    for name, targets in graph().items():
        if not name.startswith("manager.") or name.count(".") < 1:
            continue
        room = name.split(".")[1]
        for target in targets:
            if target.startswith("manager.") and target.split(".")[1] != room:
                other = target.split(".")[1]
                assert room in rank and other in rank, f"{name} -> {target}: a room not in MANAGER_ROOMS"
                if rank[other] > rank[room]:
                    upward.add(f"{name} -> {target}")
    assert not upward, f"imports that run back up between the manager's rooms: {sorted(upward)}"


def test_the_manager_keeps_only_its_entry_points_outside_the_rooms() -> None:
    loose = sorted(path.stem for path in (REPO / "manager").glob("*.py")
                   if path.stem not in ("__init__", "service", "cli"))
    assert not loose, f"modules outside the manager's rooms: {loose}"
