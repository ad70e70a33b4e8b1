"""Issue 12 on real processes: the batch size the slots use and where it comes from, and a
rate-limited queue's limiter, on the dashboard (headless Chromium) and the JSON API.

Queue server, pulsar, manager, master with a handler module of its own, and the dashboard:
- thumbs: the handler class says batch_size = 5, the config says nothing -> 5 (handler class);
- mail: the handler class says 3, the config says 8 -> 8 (config);
- calls: rate_limit 20/s, one job of which calls self.limiter.slow_down().
The handlers write the size of each batch they get, so "in force" is checked against what
the slots really took. Then the pulsar is killed: the page says so, quickly.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from admin_proc import AdminProc, cluster_admin
from admin_testing import poll_until
from browser_chromium import launched_browser, needs_chromium
from procs import import_by_path

from queue_server.client import QueueClient

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
RATE_PER_S = 20
ONE_SLOT = {"min_slots": 1, "max_slots": 1}
QUEUES = {
    "thumbs": dict(ONE_SLOT),
    "mail": {**ONE_SLOT, "batch_size": 8},
    "calls": {**ONE_SLOT, "rate_limit": {"permits": RATE_PER_S, "period_s": 1.0, "margin": 0}},
}
DEADLINE_S = 40.0
HANDLERS = '''
from pathlib import Path
from slot.handler import Handler, handler

HERE = Path(__file__).parent


def note_batch(queue, size):
    with open(HERE / f"{queue}.batches", "a") as out:
        out.write(f"{size}\\n")


@handler("thumbs")
class Thumbs(Handler):
    batch_size = 5

    def handle(self, jobs):
        note_batch("thumbs", len(jobs))


@handler("mail")
class Mail(Handler):
    batch_size = 3

    def handle(self, jobs):
        note_batch("mail", len(jobs))


@handler("calls")
class Calls(Handler):
    batch_size = 1

    def handle_job(self, job):
        if job.data == b"429":
            self.limiter.slow_down()
'''

pytestmark = needs_chromium


procs = import_by_path("test_service_procs", REPO_ROOT / "tests" / "manager" / "test_service_procs.py")


def free_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, AdminProc, Browser]]:
    """The cluster, its dashboard and Chromium: the dashboard and Chromium start while the
    manager waits out its first plan's grace (2 s)."""
    root = tmp_path_factory.mktemp("in_force")
    (root / "first_app_handlers.py").write_text(HANDLERS)
    cluster = procs.Cluster.create(root, QUEUES)
    pulsar_section = f'\n[pulsar]\nlisten = "{free_endpoint()}"\n'
    try:
        cluster.start_queue_server()
        pulsar_config = cluster.config("pulsar")
        pulsar_config.write_text(pulsar_config.read_text() + pulsar_section)
        cluster.spawn("pulsar", ["pulsar", "--config", str(pulsar_config)])
        cluster.start_manager()
        master_config = cluster.config("master-alpha", host_name="alpha",
                                       handler_modules=["first_app_handlers"], python_path=[str(root)])
        master_config.write_text(master_config.read_text() + pulsar_section)
        master = cluster.spawn("master-alpha", ["master", "--config", str(master_config),
                                                "--manager", cluster.manager_endpoint], report=True)
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(procs.wait_running, master, cluster,
                                  {"thumbs": 1, "mail": 1, "calls": 1}, timeout_s=30.0)
            with cluster_admin(cluster, pulsar_section) as admin, launched_browser() as browser:
                running.result()
                yield cluster, admin, browser
    finally:
        cluster.close()


def batches(cluster: Any, queue: str) -> list[int]:
    path = cluster.root / f"{queue}.batches"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def queue_api(admin: AdminProc, queue: str) -> dict[str, Any]:
    body: dict[str, Any] = admin.get(f"/api/queues/{queue}").json()
    return body


def test_the_dashboard_and_api_show_the_batch_size_the_slots_use_and_the_limiter(
    parts: tuple[Any, AdminProc, Browser],
) -> None:
    cluster, admin, browser = parts
    with QueueClient(cluster.queue_server.address) as client:
        client.put_many("thumbs", [b"t%d" % n for n in range(40)])
        client.put_many("mail", [b"m%d" % n for n in range(40)])
        client.put_many("calls", [b"ok", b"429", *(b"ok" for _ in range(8))])
        wanted = {"thumbs": 40, "mail": 40, "calls": 10}
        poll_until(lambda: all(client.stats(q)[q].done >= n for q, n in wanted.items()),
                   deadline_s=DEADLINE_S, what=f"every job done {wanted}\n{cluster.logs()}")
    # What the slots really took: batches of at most the size in force, and full ones seen.
    assert max(batches(cluster, "thumbs")) == 5, batches(cluster, "thumbs")
    assert max(batches(cluster, "mail")) == 8, batches(cluster, "mail")

    # The master's report says the same, per queue and per slot
    master = next(proc for proc in cluster.procs if proc.name == "master-alpha")
    report = master.report()
    assert report is not None
    assert (report.queue_settings["thumbs"].batch_size, report.queue_settings["thumbs"].batch_size_source) == (
        5, "handler")
    assert (report.queue_settings["mail"].batch_size, report.queue_settings["mail"].batch_size_source) == (
        8, "config")
    assert {slot.queue: slot.batch_size for slot in report.slots} == {"thumbs": 5, "mail": 8, "calls": 1}

    # The API: the value in force with its source; the config's own value only when written
    thumbs = poll_until(lambda: (body := queue_api(admin, "thumbs"))["row"] and body["row"]["batch_size"] and body,
                        deadline_s=DEADLINE_S, what="thumbs' batch size in the manager's samples")
    assert (thumbs["row"]["batch_size"], thumbs["row"]["batch_size_source"]) == (5, "handler")
    assert thumbs["config"]["batch_size"] is None
    mail = poll_until(lambda: (body := queue_api(admin, "mail"))["row"] and body["row"]["batch_size"] and body,
                      deadline_s=DEADLINE_S, what="mail's batch size in the manager's samples")
    assert (mail["row"]["batch_size"], mail["row"]["batch_size_source"]) == (8, "config")
    assert mail["config"]["batch_size"] == 8
    assert thumbs["limiter"] is None
    rows = {row["queue"]: row for row in admin.get("/api/queues").json()["queues"]}
    assert (rows["thumbs"]["batch_size"], rows["mail"]["batch_size"]) == (5, 8)
    assert rows["thumbs"]["limiter"] is None and rows["calls"]["limiter"]["granted_total"] >= 10

    limiter = queue_api(admin, "calls")["limiter"]
    assert limiter["name"] == "calls" and limiter["reachable"] and limiter["error"] is None
    assert limiter["configured_per_s"] == RATE_PER_S
    assert limiter["pulsar_configured_per_s"] == RATE_PER_S
    assert limiter["granted_total"] >= 10
    assert limiter["cuts"] == 1 and limiter["current_per_s"] < RATE_PER_S
    assert limiter["pauses"] == 0

    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.set_default_timeout(10_000)
    page.goto(f"{admin.url}/queues/thumbs")
    assert " ".join((page.text_content("#batch-size") or "").split()).startswith("5 (handler class)")
    assert page.query_selector("#limiter") is None
    page.goto(f"{admin.url}/queues/mail")
    assert " ".join((page.text_content("#batch-size") or "").split()).startswith("8 (config)")
    page.goto(f"{admin.url}/queues/calls")
    shown = " ".join((page.text_content("#limiter") or "").split())
    assert shown.startswith(f"calls: configured {RATE_PER_S}.00/s, in force ")
    granted = page.get_attribute("#limiter [data-field=granted_total]", "data-value")
    assert granted is not None and int(granted) >= 10
    assert page.text_content("#limiter [data-field=cuts]") == "1"
    assert page.query_selector("#limiter-error") is None
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "queue-limiter.png"), full_page=True)
    page.goto(f"{admin.url}/queues")
    assert page.text_content("#queues tr[data-key=thumbs] [data-batch-source]") == "5 (h)"
    assert page.text_content("#queues tr[data-key=mail] [data-batch-source]") == "8 (c)"
    rate = " ".join((page.text_content("#queues tr[data-key=calls] [data-limiter]") or "").split())
    assert rate.endswith(f"/ {RATE_PER_S}.0") and not rate.startswith("\u2013"), rate
    assert page.text_content("#queues tr[data-key=thumbs] [data-limiter]") == "\u2013"

    # The pulsar goes away: the page and the API say so, without hanging.
    pulsar = next(proc for proc in cluster.procs if proc.name == "pulsar")
    pulsar.kill_group()
    started = time.monotonic()
    down = queue_api(admin, "calls")["limiter"]
    assert time.monotonic() - started < 10.0  # the 0.5 s reply timeout, not a hang
    assert not down["reachable"] and down["granted_total"] is None
    assert "did not answer" in down["error"]
    page.goto(f"{admin.url}/queues/calls")
    assert "the pulsar did not answer" in (page.text_content("#limiter-error") or "")
    page.goto(f"{admin.url}/queues")
    assert "no pulsar" in (page.text_content("#queues tr[data-key=calls] [data-limiter]") or "")
    page.goto(f"{admin.url}/queues/calls")
    page.screenshot(path=str(ARTIFACTS / "queue-limiter-no-pulsar.png"), full_page=True)
