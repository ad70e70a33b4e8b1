"""Longest test files first under `make test` (pytest-xdist, `--dist loadgroup`,
`--no-loadscope-reorder`): a worker that pulls a 60 s file last leaves the other idle.

xdist's own order (most tests first) put the one-test files that start whole clusters at
the very end. Each file's seconds come from the last run (pytest's cache), else from
tests/file_seconds.json (a fresh clone: measured once, only the slow ones); files with
neither follow in collection order. The order only moves whole files, so what a test
sees of its own module is unchanged."""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

CACHE_KEY = "slotmap/file_seconds"
SEED = Path(__file__).with_name("file_seconds.json")


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def known_seconds(config: pytest.Config) -> dict[str, float]:
    """Per-file seconds: the checked-in figures, overridden by the last run's."""
    seconds: dict[str, float] = json.loads(SEED.read_text()) if SEED.exists() else {}
    cache = getattr(config, "cache", None)  # absent under `-p no:cacheprovider`
    if cache is not None:
        seconds.update(cache.get(CACHE_KEY, {}))
    return seconds


def longest_files_first(items: list[pytest.Item], seconds: Mapping[str, float]) -> None:
    """Reorder `items` in place: files by known seconds, longest first; stable otherwise."""
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(file_of(item.nodeid), index)
    items.sort(key=lambda item: (-seconds.get(file_of(item.nodeid), 0.0),
                                 first_seen[file_of(item.nodeid)]))


def record(config: pytest.Config, reports: Iterable[pytest.TestReport]) -> None:
    """Store this run's seconds per file (setup, call and teardown) for the next run."""
    spent: dict[str, float] = defaultdict(float)
    for report in reports:
        spent[file_of(report.nodeid)] += report.duration
    cache = getattr(config, "cache", None)
    if cache is None or not spent:
        return
    stored = dict(cache.get(CACHE_KEY, {}))
    stored.update({name: round(total, 1) for name, total in spent.items()})
    cache.set(CACHE_KEY, stored)
