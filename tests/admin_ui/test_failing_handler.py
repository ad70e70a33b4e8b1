"""Issue 9 end to end: a real handler raises on one payload (max_attempts = 3, small backoff);
the job is dead with its traceback, shown by the CLI, the API and the dashboard in headless
Chromium, retried from there, then succeeds. The counters on /metrics say the same.

Real queue server (with the queue's retry policy from the config), manager, master and slot.
"""
from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest
from admin_proc import AdminProc, cluster_admin
from admin_testing import poll_until
from browser_chromium import ARTIFACTS, launched_browser, needs_chromium
from procs import import_by_path, server_proc, to_toml
from prometheus_client.parser import text_string_to_metric_families

from queue_server.client import QueueClient

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "failing-handler-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
POLICY = {"max_attempts": 3, "retry_base_s": 0.2, "retry_max_s": 0.5}
QUEUES = {"photos": {"min_slots": 1, "max_slots": 1, "batch_size": 5, **POLICY}}
DEADLINE_S = 60.0
HANDLER = '''
from pathlib import Path
from slot.handler import Handler, handler

FIXED = Path(__file__).with_name("fixed")


def resize(data: bytes) -> None:
    if data.startswith(b"bad") and not FIXED.exists():
        raise ValueError(f"bad photo {data.decode()}")


@handler("photos")
class Photos(Handler):
    def handle_job(self, job):
        resize(job.data)
'''

pytestmark = needs_chromium

procs = import_by_path("test_service_procs", REPO_ROOT / "tests" / "manager" / "test_service_procs.py")


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[Any, AdminProc, Browser]]:
    """The cluster, its dashboard and Chromium: the dashboard and Chromium start while the
    manager waits out its first plan's grace (2 s)."""
    (tmp_path / "failing_handlers.py").write_text(HANDLER)
    cluster = procs.Cluster.create(tmp_path, QUEUES)
    try:
        policy = tmp_path / "queue-server.toml"
        policy.write_text(to_toml({"queues.photos": QUEUES["photos"]}))
        cluster.queue_server = server_proc.start_queue_server(tmp_path, "--fsync", "never",
                                                              "--config", str(policy))
        cluster.start_manager()
        master = cluster.start_master("alpha", handler_modules=["failing_handlers"],
                                      python_path=[str(tmp_path)])
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(procs.wait_running, master, cluster, {"photos": 1}, timeout_s=30.0)
            with cluster_admin(cluster, token=TOKEN) as admin, launched_browser() as browser:
                running.result()
                yield cluster, admin, browser
    finally:
        cluster.close()


def slotmap(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*server_proc.slotmap_command(), *args], capture_output=True, text=True,
                          timeout=30, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), check=False)


def metric(admin: AdminProc, name: str) -> float | None:
    for family in text_string_to_metric_families(admin.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and sample.labels == {"queue": "photos"}:
                return float(sample.value)
    return None


def test_a_job_failing_three_times_is_dead_shown_everywhere_retried_from_the_dashboard_then_done(
    started: tuple[Any, AdminProc, Browser],
) -> None:
    cluster, admin, browser = started
    address = cluster.queue_server.address
    with QueueClient(address) as client:
        client.put_many("photos", [f"good-{n}" for n in range(20)])
        assert client.put_job("photos", b"bad-7", key="photo-7").created
        dead = poll_until(lambda: (info := client.job("photo-7")) is not None and info.state == "dead" and info,
                          deadline_s=DEADLINE_S, what=f"photo-7 dead\n{cluster.logs()}")
        poll_until(lambda: client.stats("photos")["photos"].done == 20, deadline_s=DEADLINE_S,
                   what="the 20 good jobs done")
    assert dead.attempts == 3
    assert dead.error is not None and dead.error.startswith("Traceback (most recent call last)")
    assert dead.error.rstrip().endswith("ValueError: bad photo bad-7")

    # The CLI
    listed = slotmap("jobs", "photos", "--state", "dead", "--json", "--server", address)
    assert listed.returncode == 0, listed.stderr
    [shown] = json.loads(listed.stdout)
    assert (shown["key"], shown["state"], shown["attempts"], shown["data"]) == ("photo-7", "dead", 3, "bad-7")
    assert shown["error"] == dead.error
    # The API
    [api_job] = admin.get("/api/queues/photos/jobs", params={"state": "dead"}, headers=AUTH).json()["jobs"]
    assert (api_job["key"], api_job["attempts"], api_job["error_summary"]) == (
        "photo-7", 3, "ValueError: bad photo bad-7")
    # The counters: three failed attempts, one death, twenty done
    assert metric(admin, "slotmap_jobs_failed_total") == 3
    assert metric(admin, "slotmap_jobs_died_total") == 1
    assert metric(admin, "slotmap_jobs_dead") == 1
    assert metric(admin, "slotmap_jobs_done_total") == 20
    # The manager's samples (the queues page's Errors column) count the same three failures
    poll_until(lambda: metric(admin, "slotmap_queue_errors_total") == 3, deadline_s=10.0,
               what="3 errors in the manager's samples")

    # The dashboard: the fix is deployed, the admin retries the job from the dead list
    (cluster.root / "fixed").write_text("")
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.set_default_timeout(10_000)
    target = "/queues/photos/jobs?state=dead"
    page.goto(f"{admin.url}/login?next={quote(target)}")
    page.fill("input[name=token]", TOKEN)
    page.click("form.login button[type=submit]")
    page.wait_for_url(admin.url + target)
    row = "#jobs tr[data-key=photo-7]"
    assert page.text_content(f"{row} [data-field=attempts]") == "3"
    assert page.text_content(f"{row} summary") == "ValueError: bad photo bad-7"
    page.click(f"{row} summary")
    assert "Traceback (most recent call last)" in (page.text_content(f"{row} details pre") or "")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "failing-handler-dead.png"), full_page=True)
    page.click(f"{row} [data-retry=photo-7]")
    page.wait_for_selector("#jobs-notice")
    assert page.text_content("#jobs-notice") == "1 job retried"
    with QueueClient(address) as client:
        poll_until(lambda: (info := client.job("photo-7")) is not None and info.state == "done",
                   deadline_s=DEADLINE_S,
                   what=f"photo-7 run again and done\n{cluster.logs()}")
        assert client.stats("photos")["photos"].done == 21
    poll_until(lambda: metric(admin, "slotmap_jobs_done_total") == 21, deadline_s=10.0, what="21 done")
    assert metric(admin, "slotmap_jobs_dead") == 0
    assert metric(admin, "slotmap_jobs_retried_total") == 1
    assert metric(admin, "slotmap_jobs_failed_total") == 3
