"""Failures in plain sight (issue 15): a real queue server, a real manager and a real `slotmap
admin`; the Queues page's failed and dead counts in headless Chromium, and an event for each
retry and delete from the CLI, a plain client, the API and the dashboard, naming its door."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from admin_proc import AdminProc, cluster_admin
from browser_chromium import CHROMIUM, launched_browser, needs_chromium
from jobs_cluster import make_dead
from polling import poll_until
from procs import REPO_ROOT, import_by_path, slotmap_command

from queue_server.client import QueueClient

TOKEN = "failures-token"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
# No master: `photos` is configured but nothing has its handler; `photoz` (a typo) is not
# configured at all. max_slots 0 keeps the planner from wanting slots nobody can give.
QUEUES = {"photos": {"max_slots": 0}}
DEADLINE_S = 30.0  # a plan every 0.5 s; generous for a busy machine

procs = import_by_path("test_service_procs", REPO_ROOT / "tests" / "manager" / "test_service_procs.py")

if CHROMIUM.exists():
    from playwright.sync_api import Page


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    started = procs.Cluster.create(tmp_path_factory.mktemp("failures"), QUEUES)
    try:
        started.start_queue_server()
        started.start_manager()
        with QueueClient(started.queue_server.address) as client:
            make_dead(client, "photos", "dead-1")
            make_dead(client, "photos", "dead-2")
            make_dead(client, "photos", "dead-3")
            make_dead(client, "photos", "dead-4")
            client.put_job("photos", b"3.jpg", key="failing-1")
            [job] = client.get("photos", keys=True)
            client.fail(job.id, "ValueError: try later", delay_s=3600)
            client.put("photoz", b"typo")
        yield started
    finally:
        started.close()


@pytest.fixture(scope="module")
def admin(cluster: Any) -> Iterator[AdminProc]:
    with cluster_admin(cluster, token=TOKEN) as proc:
        yield proc


def _rows(admin: AdminProc) -> dict[str, dict[str, Any]]:
    return {row["queue"]: row for row in admin.get("/api/queues").json()["queues"]}


def _events(cluster: Any, kind: str) -> list[Any]:
    return cluster.events(kind)


def test_the_queues_api_counts_failed_and_dead_jobs_and_lists_queues_nothing_serves(
    cluster: Any, admin: AdminProc,
) -> None:
    rows = poll_until(lambda: (r := _rows(admin)).get("photos", {}).get("dead") == 4 and "photoz" in r and r,
                      timeout_s=DEADLINE_S)
    photos, photoz = rows["photos"], rows["photoz"]
    # The failed job is not counted again as delayed: each count is as many as its list shows.
    assert (photos["failed"], photos["dead"], photos["delayed"]) == (1, 4, 0)
    assert photos["configured"] and photos["handled"] is False and photos["unhandled"]
    assert (photoz["configured"], photoz["waiting"], photoz["unhandled"]) == (False, 1, True)
    view = admin.get("/api/queues").json()
    assert (view["totals"]["failed"], view["totals"]["dead"]) == (1, 4)
    assert view["unhandled"] == ["photos", "photoz"]


def test_retries_and_deletes_from_the_cli_and_a_plain_client_become_events_naming_the_door(
    cluster: Any, admin: AdminProc,
) -> None:
    poll_until(lambda: _rows(admin).get("photos", {}).get("dead") == 4, timeout_s=DEADLINE_S)  # a baseline
    address = cluster.queue_server.address
    retried = subprocess.run([*slotmap_command(), "retry", "photos", "dead-1", "--server", address],
                             capture_output=True, text=True, timeout=60)
    assert retried.returncode == 0, retried.stderr
    deleted = subprocess.run([*slotmap_command(), "delete", "photos", "dead-2", "--server", address],
                             capture_output=True, text=True, timeout=60)
    assert deleted.returncode == 0, deleted.stderr
    with QueueClient(address) as plain:  # a program's client, unnamed
        assert plain.retry("photos", "failing-1") == [True]
    retries = poll_until(lambda: len(e := _events(cluster, "jobs_retried")) >= 2 and e, timeout_s=DEADLINE_S)
    by_actor = {event.actor: event for event in retries}
    assert by_actor["cli"].message == "photos: 1 job retried with the CLI (slotmap retry)"
    assert by_actor["cli"].detail == {"count": 1, "door": "cli"} and by_actor["cli"].queue == "photos"
    assert by_actor["client"].message == "photos: 1 job retried by a queue client (RETRY request)"
    [delete] = poll_until(lambda: _events(cluster, "jobs_deleted"), timeout_s=DEADLINE_S)
    assert (delete.actor, delete.message) == ("cli", "photos: 1 job deleted with the CLI (slotmap delete)")


def test_an_api_retry_writes_one_event_saying_api_and_the_manager_adds_none(
    cluster: Any, admin: AdminProc,
) -> None:
    response = httpx_post(admin, "/api/queues/photos/jobs/retry", {"keys": ["dead-3"]})
    assert response.status_code == 200, response.text
    assert response.json()["count"] == 1
    event = next(e for e in _events(cluster, "jobs_retried") if e.id == response.json()["event_id"])
    assert event.actor == "admin" and event.detail["door"] == "api"
    assert event.message == "retry of dead-3 of photos by admin through the API"
    seen = len(_events(cluster, "jobs_retried"))
    # Plans go on (the manager read STATS after the retry): still no event of its own for it.
    # (The row is read through the latest samples: polled, as a plan may be half written.)
    start = poll_until(lambda: _rows(admin).get("photos", {}).get("at_unix"), timeout_s=DEADLINE_S)
    poll_until(lambda: _rows(admin).get("photos", {}).get("at_unix", 0) > start + 1.0, timeout_s=DEADLINE_S)
    assert len(_events(cluster, "jobs_retried")) == seen
    assert not [e for e in _events(cluster, "jobs_retried") if e.actor in ("api", "dashboard")]


def httpx_post(admin: AdminProc, path: str, body: dict[str, Any]) -> Any:
    import httpx

    return httpx.post(admin.url + path, json=body, timeout=10.0,
                      headers={"Authorization": f"Bearer {TOKEN}"})


@needs_chromium
def test_the_queues_page_shows_the_cluster_totals_and_marks_dead_and_unserved_queues_in_chromium(
    cluster: Any, admin: AdminProc,
) -> None:
    want = poll_until(lambda: (v := admin.get("/api/queues").json())["totals"]["dead"] >= 1 and v,
                      timeout_s=DEADLINE_S)
    with launched_browser() as browser:
        page: Page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(10_000)
        page.goto(f"{admin.url}/queues")
        totals = page.locator("#cluster-totals")
        assert totals.locator("[data-field=dead]").text_content() == str(want["totals"]["dead"])
        assert totals.locator("[data-field=failed]").text_content() == str(want["totals"]["failed"])
        photos = page.locator('#queues tbody tr[data-key="photos"]')
        assert photos.locator("a[data-dead]").get_attribute("href") == "/queues/photos/jobs?state=dead"
        dead_count = photos.locator("td a[data-field=dead]")  # every count links to its list (issue 26)
        assert dead_count.text_content() == str(_rows(admin)["photos"]["dead"])
        assert dead_count.get_attribute("href") == "/queues/photos/jobs?state=dead"
        assert totals.locator("#total-dead").get_attribute("href") == "/jobs?state=dead"
        assert photos.locator("[data-unhandled]").text_content() == "no handler"
        photoz = page.locator('#queues tbody tr[data-key="photoz"]')
        assert photoz.locator("[data-unhandled]").text_content() == "not configured"
        assert "photoz" in page.text_content("#unhandled-queues")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "queues-failed-dead.png"), full_page=True)
        # The dashboard's own door: retry a dead job from its page, logged in.
        page.goto(f"{admin.url}/login?next={quote('/jobs/dead-4')}")
        page.fill("input[name=token]", TOKEN)
        page.click("form.login button[type=submit]")
        page.wait_for_url(f"{admin.url}/jobs/dead-4")
        page.click("#job-retry")
        page.wait_for_load_state()
    event = poll_until(lambda: [e for e in _events(cluster, "jobs_retried") if "dead-4" in e.message],
                       timeout_s=DEADLINE_S)[0]
    assert event.message == "retry of dead-4 of photos by admin on the dashboard"
    assert event.detail["door"] == "dashboard"
