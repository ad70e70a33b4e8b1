"""The Jobs page over every queue, failures by error type, Busy, bulk confirmations and the
read-only explanation in headless Chromium (issue 26): a real queue server, a real `slotmap
admin`, clicks. Needs Debian's chromium at /usr/bin/chromium. Screenshots: tests/artifacts/."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from browser_chromium import CHROMIUM, browser_page, needs_chromium, shoot
from jobs_cluster import JobsCluster, jobs_cluster, make_dead, make_dead_of, other_admin

from queue_server.client import QueueClient

TOKEN = "browser-search-token"

pytestmark = needs_chromium

if CHROMIUM.exists():
    from playwright.sync_api import Browser, Dialog, Page



@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path_factory.mktemp("browser_search"), token=TOKEN) as running:
        with running.client() as client:
            for index in range(5):
                make_dead_of(client, "photos", f"photo-{index}", "ValueError: bad photo" if index % 2 else "OSError: disk")
            for index in range(3):
                make_dead_of(client, "thumbs", f"thumb-{index}", "ValueError: bad thumb")
        yield running


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with browser_page(browser) as opened:
        yield opened


def log_in(page: Page, cluster: JobsCluster, target: str) -> None:
    page.goto(f"{cluster.admin.url}/login?next={quote(target)}")
    page.fill("input[name=token]", TOKEN)
    page.click("form.login button[type=submit]")
    page.wait_for_url(f"{cluster.admin.url}{target}")


def shown_keys(page: Page) -> list[str]:
    keys: list[str] = page.eval_on_selector_all("#jobs tbody tr[data-key]", "rows => rows.map(r => r.dataset.key)")
    return keys


def test_the_jobs_page_searches_every_queue_and_pages_on_the_server(cluster: JobsCluster, page: Page) -> None:
    log_in(page, cluster, "/jobs?state=dead")
    assert len(shown_keys(page)) == 8
    page.fill("#search-error", "ValueError")
    page.fill("#search-limit", "2")
    page.click("#search-submit")
    page.wait_for_selector("#jobs")
    seen = shown_keys(page)
    assert len(seen) == 2
    pages = 1
    while page.query_selector("#next-page"):
        page.click("#next-page")
        page.wait_for_load_state()
        seen += shown_keys(page)
        pages += 1
    assert sorted(seen) == ["photo-1", "photo-3", "thumb-0", "thumb-1", "thumb-2"] and pages == 3
    page.goto(f"{cluster.admin.url}/jobs?state=dead")
    page.fill("#search-prefix", "thumb-")
    page.fill("#search-queue", "thumbs")
    page.select_option("#search-within", "1 h")
    page.click("#search-submit")
    page.wait_for_selector("#jobs")
    assert sorted(shown_keys(page)) == ["thumb-0", "thumb-1", "thumb-2"]
    row = "#jobs tr[data-key=thumb-1]"
    assert page.text_content(f"{row} summary") == "ValueError: bad thumb"
    shoot(page, "jobs-search")


def test_failures_are_grouped_by_type_and_each_group_opens_its_jobs(cluster: JobsCluster, page: Page) -> None:
    log_in(page, cluster, "/failures")
    row = '#failure-groups tr[data-key="photos:OSError"]'
    assert page.text_content(f"{row} td[data-field=failed_attempts]") == "3"
    page.click(f"{row} summary")
    assert "Traceback (most recent call last)" in (page.text_content(f"{row} details pre") or "")
    shoot(page, "jobs-failures")
    page.click(f"{row} a[data-list=dead]")
    page.wait_for_selector("#jobs")
    assert sorted(shown_keys(page)) == ["photo-0", "photo-2", "photo-4"]


def test_the_busy_view_lists_the_running_jobs_with_host_slot_and_since_when(cluster: JobsCluster,
                                                                         page: Page) -> None:
    # A connection named as a slot names its own (slot/process.py slot_door), and one unnamed.
    with QueueClient(cluster.address, name="slot.web-1.example.4") as slot, cluster.client() as other:
        slot.put_job("thumbs", b"busy", key="busy-1")
        [job] = slot.get("thumbs", keys=True)
        other.put_job("thumbs", b"busy", key="busy-2")
        [unnamed] = other.get("thumbs", keys=True)
        log_in(page, cluster, "/busy")
        assert page.eval_on_selector_all("#busy tbody tr", "rows => rows.map(r => r.dataset.key)") == [
            "busy-1", "busy-2"]
        row = '#busy tr[data-key="busy-1"]'
        assert page.text_content(f"{row} td[data-field=running_for]")
        assert page.text_content(f"{row} td[data-field=running_host]") == "web-1.example"
        assert page.get_attribute(f"{row} td[data-field=running_host] a", "href") == "/slotmap#host-web-1.example"
        assert page.text_content(f"{row} td[data-field=running_slot]") == "4"
        other_row = '#busy tr[data-key="busy-2"]'
        assert page.text_content(f"{other_row} td[data-field=running_host]") == ""
        assert page.text_content(f"{other_row} td[data-field=running_slot]") == ""
        shoot(page, "jobs-busy")
        page.click(f"{row} a.key")  # the job's own page says where it runs too (it said nothing)
        page.wait_for_selector("#job-fields")
        assert page.text_content("#job-fields [data-field=running_on]") == "web-1.example, slot 4"
        assert page.get_attribute("#job-fields [data-field=running_on] a", "href") == "/slotmap#host-web-1.example"
        slot.done(job.id)
        other.done(unnamed.id)


def test_bulk_actions_ask_first_and_a_dismissed_question_changes_nothing(cluster: JobsCluster, page: Page) -> None:
    with cluster.client() as client:
        make_dead(client, "bulk", "bulk-1")
        make_dead(client, "bulk", "bulk-2")
    log_in(page, cluster, "/queues/bulk/jobs?state=dead")
    asked: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#delete-all")
    assert asked == ["Delete all 2 dead jobs of bulk? This cannot be undone."]
    assert sorted(shown_keys(page)) == ["bulk-1", "bulk-2"]
    page.check('input[name=key][value="bulk-1"]')

    def accept(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    page.click("#retry-selected")
    page.wait_for_selector("#jobs-notice")
    assert asked[-1] == "Retry the 1 selected dead jobs of bulk?"
    assert page.text_content("#jobs-notice") == "1 job retried"
    assert shown_keys(page) == ["bulk-2"]


def test_without_javascript_a_bulk_action_gets_a_confirmation_page(cluster: JobsCluster, browser: Browser) -> None:
    with cluster.client() as client:
        make_dead(client, "nojs", "nojs-1")
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.set_default_timeout(10_000)
        log_in(page, cluster, "/queues/nojs/jobs?state=dead")
        page.click("#delete-all")
        page.wait_for_selector("#confirm-question")
        assert page.text_content("#confirm-question") == "Delete all 1 dead jobs of nojs? This cannot be undone."  # with the count
        with cluster.client() as client:
            assert client.job("nojs-1") is not None  # nothing deleted yet
        page.click("#confirm-yes")
        page.wait_for_selector("#jobs-notice")
        assert page.text_content("#jobs-notice") == "1 job deleted"
    finally:
        context.close()


def test_a_read_only_dashboard_says_why_the_buttons_are_missing_and_how_to_get_them(
    cluster: JobsCluster, tmp_path: Path, page: Page,
) -> None:
    with other_admin(cluster, tmp_path, token="") as read_only:
        with read_only.client() as client:
            make_dead(client, "readonly", "readonly-7")
        page.goto(f"{read_only.admin.url}/queues/readonly/jobs?state=dead")
        assert shown_keys(page) == ["readonly-7"]
        assert page.query_selector("#delete-all") is None and page.query_selector("[data-retry]") is None
        why = page.text_content("#why-no-actions") or ""
        assert "Read-only" in why and "no admin token" in why and "[admin]" in why and "log in" in why
        shoot(page, "jobs-read-only")


def test_signed_out_with_a_token_configured_the_page_says_to_log_in(cluster: JobsCluster, page: Page) -> None:
    page.goto(f"{cluster.admin.url}/queues/photos")
    why = page.text_content("#why-no-actions") or ""
    assert "Not signed in" in why
    assert page.get_attribute("#why-login", "href") == "/login?next=/queues/photos"
