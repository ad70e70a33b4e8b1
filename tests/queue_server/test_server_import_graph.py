"""The import graph of queue_server/server (issue 17, H): replication's parts stay out of
the import circle, and the circle does not grow. Every import counts, those under
TYPE_CHECKING too (a circle of types is still a circle of understanding)."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "queue_server" / "server"
PREFIX = "queue_server.server"
# Replication's modules: none may be in a circle.
OUTSIDE = {"liveness", "sync_commit", "replica_watch", "replication", "authority", "roles"}
# The circle as it stands (to be broken, never to grow): the 9 modules of issue 17, and
# door.py and stats.py that issue 16's work brought into it meanwhile.
KNOWN_CIRCLE = {"server", "connection", "control", "follower", "journal", "housekeeping",
                "queue_commands", "job_commands", "auth", "door", "stats"}


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            rest = node.module[len(PREFIX):].lstrip(".")
            if rest:
                found.add(rest.split(".")[0])
            else:  # from queue_server.server import a, b
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX + "."):
                    found.add(alias.name[len(PREFIX) + 1:].split(".")[0])
    return found


def graph() -> dict[str, set[str]]:
    modules = {path.stem: path for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    return {name: imports_of(path) & modules.keys() - {name} for name, path in modules.items()}


def circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_replication_modules_are_in_no_import_circle() -> None:
    edges = graph()
    assert OUTSIDE <= edges.keys()
    for circle in circles(edges):
        assert not circle & OUTSIDE, f"replication modules in an import circle: {sorted(circle)}"


def test_the_servers_import_circle_does_not_grow() -> None:
    for circle in circles(graph()):
        assert circle <= KNOWN_CIRCLE, f"new modules joined the circle: {sorted(circle - KNOWN_CIRCLE)}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]
