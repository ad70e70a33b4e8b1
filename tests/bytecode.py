"""Compile the product's bytecode once before the run, for the processes the tests start.

Each test starts real queue servers, masters, managers, dashboards and `slotmap` commands.
Where PYTHONDONTWRITEBYTECODE is set (it is on the shared test machines) Python writes no
__pycache__, so every one of those processes compiled the ~100 modules it imports from source:
0.1 to 0.3 s of CPU per start on the 2-core box (bench/RESULTS.md, "Start-up CPU"). Python
still reads bytecode it finds, so writing it once here, in the controller, spares them all;
an up-to-date tree costs 0.2 s to check. A tree that cannot be written is left as it is.
"""
from __future__ import annotations

import compileall
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("queue_server", "config", "slot", "master", "manager", "admin_ui", "deploy")


def compile_product() -> bool:
    """Write the bytecode of every product module that has none or an old one; True when all
    could be written."""
    return all(compileall.compile_dir(REPO_ROOT / package, quiet=2, workers=1)
               for package in PACKAGES)
