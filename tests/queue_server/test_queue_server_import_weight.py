"""The client library and the wire format import without the daemon (issue 11).

Each module of queue_server.client and queue_server.protocol is imported in a fresh
interpreter; the test fails when that loaded a module of queue_server.server (the
asyncio daemon), or, for the protocol, asyncio or the clients. Where a token comes from
(config/tokens.py) and the retry policy (protocol/retry.py) are shared, not the server's.
"""
from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import queue_server.client
import queue_server.protocol

REPO_ROOT = Path(__file__).resolve().parents[2]
ALLOWED: set[str] = set()
PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(name for name in sys.modules
                        if name == "asyncio" or name.startswith("queue_server."))))
"""


def modules_of(package: object) -> list[str]:
    name = package.__name__  # type: ignore[attr-defined]
    path = package.__path__  # type: ignore[attr-defined]
    return [name, *sorted(info.name for info in pkgutil.walk_packages(path, name + "."))]


def loaded_by(module: str) -> set[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, module], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout))


@pytest.mark.parametrize("module", modules_of(queue_server.client))
def test_a_client_module_does_not_load_the_server(module: str) -> None:
    server = {name for name in loaded_by(module) if name.startswith("queue_server.server")}
    assert server <= ALLOWED, f"import {module} loaded these"


@pytest.mark.parametrize("module", modules_of(queue_server.protocol))
def test_a_protocol_module_loads_neither_side_nor_asyncio(module: str) -> None:
    heavy = {name for name in loaded_by(module)
             if name == "asyncio" or name.startswith(("queue_server.server", "queue_server.client"))}
    assert heavy == set(), f"import {module} loaded these"


def test_the_package_exports_what_users_write() -> None:
    from queue_server.client import AsyncQueueClient, QueueClient, QueueServerError
    from queue_server.client.aio import AsyncQueueClient as Aio
    from queue_server.client.sync import QueueClient as Sync
    from queue_server.protocol.client_errors import QueueServerError as Error

    assert (QueueClient, AsyncQueueClient, QueueServerError) == (Sync, Aio, Error)
