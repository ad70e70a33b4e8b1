"""The server's mixins (roles.py, replicated.py, conn_output.py) name what they need of the
class they are mixed into as abstract methods, never as empty stubs: an empty stub would
silently do nothing once the real method was removed or renamed, an abstract one makes the
class fail at construction (and mypy at the call that constructs it)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from queue_server.server.conn_output import Output
from queue_server.server.connection import Connection
from queue_server.server.replicated import Replicated
from queue_server.server.roles import Roles
from queue_server.server.server import QueueServer

PACKAGE = Path(__file__).resolve().parents[2] / "queue_server" / "server"
MIXINS = ["roles.py", "replicated.py", "conn_output.py"]


def _is_stub(function: ast.FunctionDef) -> bool:
    body = [node for node in function.body
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str))]  # a docstring
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
               and node.value.value is Ellipsis for node in body) or not body


def _is_abstract(function: ast.FunctionDef) -> bool:
    return any(ast.unparse(decorator) in ("abc.abstractmethod", "abstractmethod")
               for decorator in function.decorator_list)


def _is_protocol(node: ast.ClassDef) -> bool:
    return any(ast.unparse(base).split("[")[0] in ("Protocol", "typing.Protocol") for base in node.bases)


@pytest.mark.parametrize("module", MIXINS)
def test_every_stub_of_a_mixin_is_abstract(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text())
    empty = [f"{cls.name}.{function.name}"
             for cls in tree.body if isinstance(cls, ast.ClassDef) and not _is_protocol(cls)
             for function in cls.body
             if isinstance(function, ast.FunctionDef) and _is_stub(function) and not _is_abstract(function)]
    assert not empty, f"{module}: empty stubs that would do nothing if the real method went: {empty}"


@pytest.mark.parametrize("mixin, concrete", [(Roles, QueueServer), (Replicated, QueueServer),
                                             (Output, Connection)])
def test_the_server_and_the_connection_implement_every_abstract_method(mixin: type, concrete: type) -> None:
    assert mixin.__abstractmethods__, f"{mixin.__name__} names no abstract method"  # type: ignore[attr-defined]
    assert not concrete.__abstractmethods__  # type: ignore[attr-defined]


def test_the_stub_finder_tells_a_stub_from_a_method() -> None:
    source = '''
class A:
    def stub(self) -> None: ...
    def documented(self) -> None:
        """Only a docstring."""
        ...
    def real(self) -> int:
        return 1
'''
    functions = {node.name: node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)}
    assert [name for name, function in functions.items() if _is_stub(function)] == ["stub", "documented"]
