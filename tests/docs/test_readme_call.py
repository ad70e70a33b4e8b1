"""README's "Putting jobs" Python example works copied as is against `make run`'s cluster
(`slotmap run` with deploy/default_cluster.toml; only the ports are swapped for free ones)."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_guide import PORTS, AppRun, Block, blocks, free_port

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[AppRun]:
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    run = AppRun(tmp_path, env, {port: free_port() for port in PORTS})
    config = (REPO_ROOT / "deploy" / "default_cluster.toml").read_text()
    try:
        run.run(Block("toml", {"file": "cluster.toml"}, frozenset(), config, 0))
        run.run(Block("sh", {"ready": "the cluster is up"}, frozenset({"background"}),
                      "slotmap run --config cluster.toml --no-producer", 0))
        yield run
    finally:
        run.stop()


@pytest.mark.timeout(300)
def test_the_readme_call_example_runs_against_make_runs_cluster(cluster: AppRun) -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    [example] = [b for b in blocks(readme) if b.language == "python" and "queue.call(" in b.code]
    assert "output_queue" not in example.code  # the caller does not name the reply queue
    cluster.run(example)
