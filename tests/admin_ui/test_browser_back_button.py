"""What the browser's Back button shows after an action or a logout, in headless Chromium:
a real queue server, a real `slotmap admin`, clicks. Needs Debian's chromium at /usr/bin/chromium.

Pages kept in the browser's cache came back as they were: jobs already deleted still listed
with their boxes ticked, and a job's data after Log out. Ticked boxes restored on a page
fetched anew land by position on whichever jobs stand there now.
"""
from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from browser_chromium import CHROMIUM, browser_page, needs_chromium
from jobs_cluster import JobsCluster, jobs_cluster, make_dead

TOKEN = "browser-back-token"

pytestmark = needs_chromium

if CHROMIUM.exists():
    from playwright.sync_api import Browser, Page


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path_factory.mktemp("browser_back"), token=TOKEN,
                      queues=("photos", "thumbs")) as running:
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


def ticked_keys(page: Page) -> list[str]:
    keys: list[str] = page.eval_on_selector_all("#jobs input[name=key]:checked", "boxes => boxes.map(b => b.value)")
    return keys


def test_back_after_deleting_ticked_jobs_lists_the_jobs_now_with_no_box_ticked(
    cluster: JobsCluster, page: Page,
) -> None:
    with cluster.client() as client:
        for index in range(6):
            make_dead(client, "photos", f"back-{index}")
    log_in(page, cluster, "/queues/photos/jobs?state=dead")
    assert sorted(shown_keys(page)) == [f"back-{index}" for index in range(6)]
    # The first two rows (newest first): restored by position, ticks would land on back-3 and back-2.
    page.check("#jobs input[name=key][value=back-5]")
    page.check("#jobs input[name=key][value=back-4]")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#delete-selected")
    page.wait_for_selector("#jobs-notice")
    assert page.text_content("#jobs-notice") == "2 jobs deleted"
    page.go_back()
    page.wait_for_selector("#jobs")
    # Before: the page as it was (back-5 and back-4 listed and ticked), or, fetched anew,
    # back-3 and back-2 ticked in their place: "Delete selected" would then delete them.
    assert sorted(shown_keys(page)) == [f"back-{index}" for index in range(4)]
    assert ticked_keys(page) == []


def test_back_after_log_out_does_not_show_the_job_data_again(cluster: JobsCluster, page: Page) -> None:
    with cluster.client() as client:
        make_dead(client, "thumbs", "secret-1", data=b'{"card": "4111-1111"}')
    log_in(page, cluster, "/jobs/secret-1")
    assert page.text_content("#job-data") == '{"card": "4111-1111"}'
    page.click("form[action='/logout'] button")
    page.wait_for_url(f"{cluster.admin.url}/queues")
    page.go_back()
    page.wait_for_selector("form.login")  # asked anew: the job page needs the token again
    assert "4111" not in page.content()
