"""The dashboard knows the manager's history only through manager/storage/store.py and store_reads.py (issue 11).

No admin_ui module imports SQLAlchemy or the manager's tables, and no event kind is spelled
as text outside the one EventKind enum: a kind renamed there cannot leave the dashboard
filtering, grouping or linking by the old word.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import admin_ui
from manager.storage.store import EventKind

ADMIN_UI = Path(admin_ui.__file__).resolve().parent
REPO = ADMIN_UI.parent
MANAGER = REPO / "manager"
FORBIDDEN = ("sqlalchemy", "manager.storage.db", "manager.storage.model")
KINDS = frozenset(str(kind) for kind in EventKind)


def modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def imported(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def is_forbidden(name: str) -> bool:
    return any(name == root or name.startswith(f"{root}.") for root in FORBIDDEN)


def kind_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in KINDS]


@pytest.mark.parametrize("path", modules(ADMIN_UI), ids=lambda path: str(path.relative_to(ADMIN_UI)))
def test_a_dashboard_module_imports_neither_sqlalchemy_nor_the_managers_tables(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    assert [name for name in imported(tree) if is_forbidden(name)] == []


def test_the_boundary_check_sees_an_import_of_the_tables() -> None:
    tree = ast.parse("from manager.storage.db import Event\nimport sqlalchemy.orm\nfrom manager.storage import model\n")
    assert [name for name in imported(tree) if is_forbidden(name)] == [
        "manager.storage.db", "manager.storage.db.Event", "sqlalchemy.orm", "manager.storage.model"]


@pytest.mark.parametrize("path", [*modules(ADMIN_UI), *modules(MANAGER), *modules(REPO / "master")],
                         ids=lambda path: str(path.relative_to(REPO)))
def test_no_module_spells_an_event_kind_as_text(path: Path) -> None:
    if path == MANAGER / "storage" / "store.py":
        pytest.skip("the enum itself")
    assert kind_literals(path) == []


@pytest.mark.parametrize("path", sorted(ADMIN_UI.glob("templates/*.html")), ids=lambda path: path.name)
def test_no_template_spells_an_event_kind_as_text(path: Path) -> None:
    quoted = re.findall(r"""['"]([a-z_]+)['"]""", path.read_text())
    assert [word for word in quoted if word in KINDS] == []


def test_the_stored_kinds_keep_their_values() -> None:
    """Rows already in a database hold these words; a new kind may be added, none renamed."""
    assert {str(kind) for kind in EventKind} >= {
        "manager_active", "master_joined", "master_back", "master_restarted", "master_lost",
        "master_left", "slots_moved", "override_applied", "queue_server_unreachable", "jobs_failed",
        "jobs_dead", "dead_jobs_dropped", "pause_requested", "resume_requested", "limits_changed",
        "jobs_retried", "jobs_deleted",
    }
