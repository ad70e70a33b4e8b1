"""The product's bytecode is written before the tests start processes (tests/bytecode.py):
under PYTHONDONTWRITEBYTECODE each queue server, master or `slotmap` command the tests start
would otherwise compile its modules from source again."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from test_import_graph import product_modules

from tests import bytecode


def stale_bytecode() -> list[str]:
    """Product modules whose bytecode is missing or older than their source."""
    stale = []
    for name, path in product_modules().items():
        cached = Path(importlib.util.cache_from_source(str(path)))
        if not cached.exists() or cached.stat().st_mtime < path.stat().st_mtime:
            stale.append(name)
    return stale


def test_the_run_starts_with_every_product_module_compiled() -> None:
    # The controller compiled them (tests/conftest.py); a worker only reads.
    assert bytecode.compile_product()
    assert stale_bytecode() == []


def test_a_started_process_reads_the_bytecode_under_dontwritebytecode() -> None:
    bytecode.compile_product()
    run = subprocess.run([sys.executable, "-v", "-c", "import queue_server.server.cli"],
                         capture_output=True, text=True, check=True, cwd=bytecode.REPO_ROOT,
                         env={"PYTHONDONTWRITEBYTECODE": "1", "PATH": ""})
    # -v names where each module's code came from: "# code object from '<file>'".
    read = [line for line in run.stderr.splitlines()
            if line.startswith("# code object from") and "queue_server" in line]
    assert read and all(".pyc" in line for line in read), read
