"""The import graph of queue_server/server has no circle (issue 17, point 9).

Every import of every module counts: at the top, inside functions, under TYPE_CHECKING
(a circle of types is still a circle of understanding), absolute or relative. The server
and a connection are known to the rest of the package through the Protocols of faces.py,
so that the command modules, AUTH, housekeeping and the follower import neither server.py
nor connection.py. A circle found is printed as the path that closes it.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "queue_server" / "server"
PREFIX = "queue_server.server"


def imports_in(source: str) -> set[str]:
    """The package's modules that `source` (a module of the package) imports, anywhere."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # from . import a / from .a import b: relative to this package
                module = f"{PREFIX}.{module}" if module else PREFIX
            if module == PREFIX:  # from queue_server.server import a, b
                found.update(alias.name for alias in node.names)
            elif module.startswith(PREFIX + "."):
                found.add(module[len(PREFIX) + 1:].split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX + "."):
                    found.add(alias.name[len(PREFIX) + 1:].split(".")[0])
    return found


def graph() -> dict[str, set[str]]:
    modules = {path.stem: path for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    return {name: imports_in(path.read_text()) & modules.keys() - {name}
            for name, path in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path (its first module again at the end), or None."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for nxt in sorted(edges[node]):
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


def test_the_server_package_imports_in_no_circle() -> None:
    edges = graph()
    assert {"server", "connection", "faces", "queue_commands", "replication"} <= edges.keys()
    assert edges["server"], "the graph reads no import of server.py: the parser is wrong"
    cycle = find_cycle(edges)
    assert cycle is None, "import circle in queue_server/server: " + " -> ".join(cycle or [])


def test_every_kind_of_import_is_an_edge() -> None:
    source = """
from typing import TYPE_CHECKING
import queue_server.server.store
from queue_server.server import responses, snapshot
from queue_server.server.waiters import Waiter
from . import door
from .journal import Journal
if TYPE_CHECKING:
    from queue_server.server.server import QueueServer
def later() -> None:
    from queue_server.server.connection import Connection
"""
    assert imports_in(source) == {"store", "responses", "snapshot", "waiters", "door", "journal",
                                  "server", "connection"}


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
