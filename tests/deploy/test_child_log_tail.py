"""The log tail `slotmap run` prints when a child dies: its end only, each line cut."""
from __future__ import annotations

from pathlib import Path

from deploy.children import Child, ChildSpec

HUGE = "x" * (4 * 1024 * 1024)  # what a handler printed in one line


def child_with_log(tmp_path: Path, lines: list[str]) -> Child:
    child = Child(ChildSpec("master", ("--version",), "here"), tmp_path)
    child.process.wait()
    child.log_path.write_text("\n".join(lines) + "\n")
    return child


def test_a_childs_log_tail_keeps_its_last_lines_after_a_huge_one(tmp_path: Path) -> None:
    lines = [f"line {n}" for n in range(20)]
    tail = child_with_log(tmp_path, ["before", HUGE, *lines]).log_tail(lines=15)
    assert tail.splitlines() == ["    " + line for line in lines[5:]]


def test_a_childs_log_tail_cuts_a_huge_last_line(tmp_path: Path) -> None:
    tail = child_with_log(tmp_path, ["before", HUGE, "the end"]).log_tail(lines=15).splitlines()
    assert tail[-1] == "    the end"
    assert tail[0].startswith("    ...xxx") and tail[0].endswith(" more characters)"), tail[0][-80:]
    assert sum(len(line) for line in tail) < 1000
