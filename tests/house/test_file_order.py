"""`make test` hands files out longest first (tests/file_order.py): whole files move, the
tests of a file keep their order, files with no known seconds keep collection order."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.file_order import file_of, longest_files_first


@dataclass
class _Item:
    nodeid: str


def test_files_are_ordered_by_their_seconds_and_stay_whole() -> None:
    items = [_Item(f"tests/{name}.py::test_{n}@tests/{name}.py") for name, n in
             [("a", 1), ("a", 2), ("slow", 1), ("b", 1), ("slower", 1), ("slow", 2)]]
    longest_files_first(items, {"tests/slow.py": 20.0, "tests/slower.py": 60.0})  # type: ignore[arg-type]
    assert [item.nodeid.split("@")[0] for item in items] == [
        "tests/slower.py::test_1", "tests/slow.py::test_1", "tests/slow.py::test_2",
        "tests/a.py::test_1", "tests/a.py::test_2", "tests/b.py::test_1"]


@pytest.mark.parametrize("nodeid", ["tests/x.py::test_y", "tests/x.py::test_y[1]@guide",
                                    "tests/x.py::Case::test_y@tests/x.py"])
def test_a_node_id_names_its_file(nodeid: str) -> None:
    assert file_of(nodeid) == "tests/x.py"
