"""A handler whose setup() fails on a host, seen where an operator looks (real manager and
master): one `handler_start_failed` event per distinct error with its traceback's tail (not
one per fork attempt), the host's sample and `slotmap hosts` with the error, how many times
and the next try; the dashboard's Hosts page likewise. Before, all of it was only in the
master's log: the dashboard showed the queue's slots not coming up, and no reason."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from procs import server_proc
from test_service_procs import Cluster, poll_until

from admin_ui.app import create_app
from admin_ui.settings import AdminSettings
from config.load import load_config
from manager.storage.store import Store

QUEUES = {"broken": {"min_slots": 1, "max_slots": 1}}
APP = '''
from slot.handler import Handler, handler

@handler("broken")
class Broken(Handler):
    def setup(self):
        connect_to_the_model_server()

    def handle(self, jobs):
        pass


def connect_to_the_model_server():
    raise ConnectionRefusedError("model server 10.0.0.7:9000 refused the connection")
'''


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from Cluster.with_queue_server(tmp_path, QUEUES)


def hosts_command(cluster: Cluster, *args: str) -> str:
    shown = subprocess.run([*server_proc.slotmap_command(), "hosts", "--config", str(cluster.root / "manager.toml"),
                            *args], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown
    return shown.stdout


def test_a_failing_setup_is_told_once_and_shown_with_the_host(cluster: Cluster, tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "sm_broken_setup.py").write_text(APP)
    cluster.start_manager()
    master = cluster.start_master("alpha", handler_modules=["sm_broken_setup"], python_path=[str(app)])
    # Forked again after 0.5, 1, 2 s of back-off: four attempts, one error.
    poll_until(lambda: (r := master.report()) is not None and any(f.count >= 4 for f in r.start_failures),
               what=lambda: cluster.logs())
    [event] = poll_until(lambda: cluster.events("handler_start_failed"), what=lambda: cluster.logs())
    assert event.host == "alpha" and event.queue == "broken"
    assert ("broken: setup() of sm_broken_setup.Broken failed on alpha: ConnectionRefusedError: "
            "model server 10.0.0.7:9000 refused the connection") in event.message
    assert event.detail is not None
    assert 'raise ConnectionRefusedError("model server' in event.detail["traceback"]
    assert "connect_to_the_model_server()" in event.detail["traceback"]  # the caller's line too

    def shown() -> str | None:
        out = hosts_command(cluster)
        return out if re.search(r"x[4-9]", out) else None

    text = poll_until(shown, what=lambda: cluster.logs())
    assert re.search(r"alpha +up", text), text
    assert re.search(r"! queue broken: setup\(\) of sm_broken_setup\.Broken failed: ConnectionRefusedError: "
                     r"model server 10\.0\.0\.7:9000 refused the connection \(x\d+ since \d\d:\d\d:\d\d UTC; "
                     r"next try in \d+s\)", text), text
    [host] = json.loads(hosts_command(cluster, "--json"))
    [stored] = host["start_failures"]
    assert stored["queue"] == "broken" and stored["count"] >= 4 and stored["retry_at_unix"] >= stored["last_at_unix"]

    # The dashboard's Hosts part of /slotmap, served by the real app over the manager's database.
    settings = dataclasses.replace(AdminSettings.from_config(load_config(cluster.root / "manager.toml")),
                                   queue_servers=(), allowed_hosts=frozenset({"testserver"}))
    store = Store.open(cluster.database_url)
    try:
        with TestClient(create_app(store, settings)) as client:
            html = client.get("/slotmap").text
            [row] = client.get("/api/slotmap").json()["hosts"]
    finally:
        store.close()
    assert ">1 handler failing</a>" in html and 'id="start-failures"' in html
    assert "<code>ConnectionRefusedError: model server 10.0.0.7:9000 refused the connection</code>" in html
    assert "/events?kind=handler_start_failed&amp;host=alpha" in html
    [failure] = row["start_failures"]
    assert failure["queue"] == "broken" and failure["count"] >= 4
    # Still one event, however many forks failed since (the count grew), and no crash event
    # per failed fork beside it (there was one every 10 s, then one a minute with the back-off).
    assert len(cluster.events("handler_start_failed")) == 1
    assert cluster.events("slot_crashed") == []
