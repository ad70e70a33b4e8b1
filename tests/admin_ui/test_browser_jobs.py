"""Failed and dead jobs in headless Chromium: a real queue server, a real `slotmap admin`, clicks.

Needs Debian's chromium at /usr/bin/chromium, like test_browser.py. Screenshots go to tests/artifacts/.
"""
from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from browser_chromium import CHROMIUM, browser_page, needs_chromium, shoot
from jobs_cluster import JobsCluster, jobs_cluster, make_dead

TOKEN = "browser-jobs-token"

pytestmark = needs_chromium

if CHROMIUM.exists():
    from playwright.sync_api import Browser, Page


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsCluster]:
    with jobs_cluster(tmp_path_factory.mktemp("browser_jobs"), token=TOKEN) as running:
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


def test_a_dead_job_is_shown_with_its_traceback_and_a_click_on_retry_makes_it_ready(
    cluster: JobsCluster, page: Page,
) -> None:
    with cluster.client() as client:
        make_dead(client, "photos", "photo-7")
        make_dead(client, "photos", "photo-8", data=b"photo-8.jpg")
    log_in(page, cluster, "/queues/photos/jobs?state=dead")
    assert sorted(shown_keys(page)) == ["photo-7", "photo-8"]
    assert page.text_content("#job-states [data-count=dead]") == "2"
    row = "#jobs tr[data-key=photo-7]"
    assert page.text_content(f"{row} summary") == "ValueError: bad photo 7"
    assert not page.is_visible(f"{row} details pre")
    page.click(f"{row} summary")
    assert page.is_visible(f"{row} details pre")
    assert "Traceback (most recent call last)" in (page.text_content(f"{row} details pre") or "")
    assert page.text_content(f"{row} td.data code") == "photo-7.jpg"
    shoot(page, "jobs-dead")
    page.click(f"{row} [data-retry=photo-7]")
    page.wait_for_selector("#jobs-notice")
    assert page.text_content("#jobs-notice") == "1 job retried"
    assert shown_keys(page) == ["photo-8"]
    with cluster.client() as client:
        info = client.job("photo-7")
        assert info is not None and (info.state, info.attempts) == ("ready", 0)
        [job] = client.get("photos", keys=True)  # and now it runs and succeeds
        assert (job.key, job.attempt) == ("photo-7", 1)
        client.done(job.id)
        finished = client.job("photo-7")  # kept as a finished job (issue 26)
        assert finished is not None and finished.state == "done"


def test_a_finished_job_shows_when_where_and_its_result(cluster: JobsCluster, page: Page) -> None:
    with cluster.client() as client:
        client.put("thumbs", b"photo-9.jpg", key="thumb-9")
        [job] = client.get("thumbs", keys=True)
        assert client.done_with_result(job.id, '{"thumb": "photo-9-small.jpg"}').found
    log_in(page, cluster, "/queues/thumbs/jobs?state=done")
    assert shown_keys(page) == ["thumb-9"]
    assert page.text_content("#job-states [data-count=done]") == "1"
    assert page.text_content("#jobs tr[data-key=thumb-9] [data-field=result]") == '{"thumb": "photo-9-small.jpg"}'
    assert page.query_selector("#jobs input[type=checkbox]") is None  # nothing to retry or delete
    page.click("#jobs tr[data-key=thumb-9] a.key")
    page.wait_for_selector("#job-result")
    assert page.text_content("#job-result") == '{"thumb": "photo-9-small.jpg"}'
    assert page.get_attribute("#job-page", "data-state") == "done"
    assert page.text_content("#job-fields [data-field=done_at]")
    assert page.text_content("#job-fields [data-field=started_at]")
    assert page.query_selector("#job-actions") is None
    shoot(page, "job-done")


def test_select_all_then_delete_selected_empties_the_dead_list(cluster: JobsCluster, page: Page) -> None:
    with cluster.client() as client:
        for key in ("a-1", "a-2", "a-3"):
            make_dead(client, "photos", key)
        expected = sorted(info.key for info in client.jobs("photos", "dead"))
    log_in(page, cluster, "/queues/photos/jobs?state=dead")
    assert sorted(shown_keys(page)) == expected
    page.check("#jobs input[data-select-all]")
    ticked = page.eval_on_selector_all("#jobs input[name=key]", "boxes => boxes.filter(b => b.checked).length")
    assert ticked == len(expected)
    page.once("dialog", lambda dialog: dialog.accept())  # bulk actions ask first (issue 26)
    page.click("#delete-selected")
    page.wait_for_selector("#jobs-notice")
    assert page.text_content("#jobs-notice") == f"{len(expected)} jobs deleted"
    assert page.is_visible("p.empty")
    with cluster.client() as client:
        assert client.jobs("photos", "dead") == []


def test_the_job_page_shows_one_job_and_retries_it(cluster: JobsCluster, page: Page) -> None:
    with cluster.client() as client:
        make_dead(client, "photos", "page-1", data=b'{"photo": 1}')
    log_in(page, cluster, "/jobs/page-1")
    assert page.text_content("#job-fields [data-field=state]").strip() == "dead"  # type: ignore[union-attr]
    assert "ValueError: bad photo 7" in (page.text_content("#job-error") or "")
    assert page.text_content("#job-data") == '{"photo": 1}'
    shoot(page, "job-dead")
    page.click("#job-retry")
    page.wait_for_url(f"{cluster.admin.url}/jobs/page-1")
    assert page.text_content("#job-fields [data-field=state]").strip() == "ready"  # type: ignore[union-attr]
    assert page.text_content("#job-fields [data-field=attempts]") == "0"
    with cluster.client() as client:  # it runs again, and this time it succeeds
        [job] = client.get("photos", keys=True)
        assert (job.key, job.attempt) == ("page-1", 1)
        client.done(job.id)


def test_without_logging_in_the_jobs_page_asks_for_the_token_and_a_form_post_is_refused(
    cluster: JobsCluster, page: Page,
) -> None:
    with cluster.client() as client:
        make_dead(client, "photos", "anon-1")
    page.goto(cluster.admin.url + "/queues/photos/jobs?state=dead")
    assert page.url.startswith(cluster.admin.url + "/login?next=")
    assert page.query_selector("#jobs") is None
    response = page.request.post(cluster.admin.url + "/queues/photos/jobs/retry", form={"one": "anon-1"})
    assert response.status == 401
    with cluster.client() as client:
        assert client.job("anon-1").state == "dead"  # type: ignore[union-attr]


def test_retry_all_dead_makes_every_dead_job_ready(cluster: JobsCluster, page: Page) -> None:
    with cluster.client() as client:
        for key in ("all-1", "all-2"):
            make_dead(client, "photos", key)
        count = len(client.jobs("photos", "dead"))
    log_in(page, cluster, "/queues/photos/jobs?state=dead")
    assert page.text_content("#retry-all") == f"Retry all dead ({count})"
    page.once("dialog", lambda dialog: dialog.accept())  # bulk actions ask first (issue 26)
    page.click("#retry-all")
    page.wait_for_selector("#jobs-notice")
    assert page.text_content("#jobs-notice") == f"{count} jobs retried"
    with cluster.client() as client:
        assert client.jobs("photos", "dead") == []
        ready = client.get("photos", count=100, keys=True)
        assert {"all-1", "all-2"} <= {job.key for job in ready}
        client.done(*(job.id for job in ready))


def test_the_job_page_cancels_a_running_job(cluster: JobsCluster, page: Page) -> None:
    with cluster.client() as client:
        client.put_job("photos", b"slow", key="run-1")
        [job] = client.get("photos", keys=True)
        log_in(page, cluster, "/jobs/run-1")
        assert page.text_content("#job-fields [data-field=state]").strip() == "running"  # type: ignore[union-attr]
        assert page.query_selector("#job-delete") is None  # running jobs are cancelled, not deleted
        asked: list[str] = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        page.click("#job-cancel")  # dismissed: nothing is cancelled
        assert asked == ["Cancel job run-1 of photos? Its slot is stopped and the job ends dead."]
        assert client.job("run-1").state == "running"  # type: ignore[union-attr]
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#job-cancel")
        page.wait_for_url(f"{cluster.admin.url}/jobs/run-1")
        assert page.text_content("#job-fields [data-field=state]").strip() == "dead"  # type: ignore[union-attr]
        assert page.text_content("#job-error") == "cancelled by dashboard"
        assert page.query_selector("#job-cancel") is None
        assert not client.done(job.id)[0].found  # the handler's late DONE finds no lease


def test_cancelling_a_waiting_job_lands_on_the_list_it_waited_in_saying_it_is_removed(
    cluster: JobsCluster, page: Page,
) -> None:
    with cluster.client() as client:
        client.put_job("thumbs", b"later", key="wait-1", delay_s=3600)
        client.put_job("thumbs", b"later", key="wait-2", delay_s=3600)
    log_in(page, cluster, "/jobs/wait-1")
    assert page.text_content("#job-fields [data-field=state]").strip() == "delayed"  # type: ignore[union-attr]
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#job-cancel")
    # Before: the Failed list (where it never was) and no word of the cancel.
    page.wait_for_url(f"{cluster.admin.url}/queues/thumbs/jobs?state=delayed&cancelled=wait-1")
    assert page.text_content("#jobs-notice") == "job wait-1 cancelled: it was waiting, so it is removed"
    assert shown_keys(page) == ["wait-2"]
    with cluster.client() as client:
        assert client.job("wait-1") is None


def test_one_jobs_delete_asks_first_on_the_list_on_its_page_and_without_javascript(
    cluster: JobsCluster, page: Page,
) -> None:
    with cluster.client() as client:
        for key in ("del-1", "del-2", "del-3"):
            make_dead(client, "letters", key)
    log_in(page, cluster, "/queues/letters/jobs?state=dead")
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("[data-delete=del-1]")
    # Before: deleted at the first click, with no question (a Delete cannot be undone).
    assert asked == ["Delete job del-1 of letters? This cannot be undone."]
    with cluster.client() as client:
        assert client.job("del-1") is not None
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-delete=del-1]")
    page.wait_for_selector("#jobs-notice")
    assert page.text_content("#jobs-notice") == "1 job deleted"
    assert sorted(shown_keys(page)) == ["del-2", "del-3"]
    page.goto(f"{cluster.admin.url}/jobs/del-2")
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#job-delete")
    assert asked[-1] == "Delete job del-2 of letters? This cannot be undone."
    with cluster.client() as client:
        assert client.job("del-2") is not None
    # Without JavaScript the server asks, and the question's form deletes that one job.
    answer = page.request.post(cluster.admin.url + "/queues/letters/jobs/delete",
                               form={"one": "del-3", "state": "dead"}, max_redirects=0)
    assert answer.status == 200 and "Delete job del-3 of letters? This cannot be undone." in answer.text()
    with cluster.client() as client:
        assert client.job("del-3") is not None
    page.set_content(answer.text())
    assert page.get_attribute("#confirm-form input[name=one]", "value") == "del-3"


# Back after an action or a logout: pages kept in the browser's cache came back as they were
# (jobs already deleted still listed and ticked; a job's data after Log out), and ticks
# restored on a page fetched anew landed by position on whichever jobs stood there now.
def ticked_keys(page: Page) -> list[str]:
    keys: list[str] = page.eval_on_selector_all("#jobs input[name=key]:checked", "boxes => boxes.map(b => b.value)")
    return keys


def test_back_after_deleting_ticked_jobs_lists_the_jobs_now_with_no_box_ticked(
    cluster: JobsCluster, page: Page,
) -> None:
    with cluster.client() as client:
        for index in range(6):
            make_dead(client, "backs", f"back-{index}")
    log_in(page, cluster, "/queues/backs/jobs?state=dead")
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
        make_dead(client, "secrets", "secret-1", data=b'{"card": "4111-1111"}')
    log_in(page, cluster, "/jobs/secret-1")
    assert page.text_content("#job-data") == '{"card": "4111-1111"}'
    page.click("form[action='/logout'] button")
    page.wait_for_url(f"{cluster.admin.url}/queues")
    page.go_back()
    page.wait_for_selector("form.login")  # asked anew: the job page needs the token again
    assert "4111" not in page.content()


def test_at_a_phones_width_the_top_bar_wraps_and_the_dead_list_keeps_its_buttons_on_screen(
    cluster: JobsCluster, page: Page,
) -> None:
    with cluster.client() as client:
        make_dead(client, "narrow", "narrow-1", data=b"x" * 120)  # a long data cell widens the table
    log_in(page, cluster, "/queues/narrow/jobs?state=dead")
    page.set_viewport_size({"width": 375, "height": 740})
    for target in ("/queues/narrow/jobs?state=dead", "/jobs/narrow-1", "/queues"):
        page.goto(f"{cluster.admin.url}{target}")
        # The page is as wide as the window: nothing lies off to the right of the dark top bar.
        assert page.evaluate("document.documentElement.scrollWidth") == 375, target
        for selector in ("form[action='/logout'] button", "a[href='/metrics']", "#nav-busy"):
            box = page.locator(selector).bounding_box()
            assert box is not None and box["x"] + box["width"] <= 375, (target, selector, box)
    page.goto(f"{cluster.admin.url}/queues/narrow/jobs?state=dead")
    for selector in ("#retry-all", "#delete-all", "[data-retry=narrow-1]", "[data-delete=narrow-1]"):
        page.locator(selector).scroll_into_view_if_needed()  # the table scrolls in its own box
        box = page.locator(selector).bounding_box()
        assert box is not None and 0 <= box["x"] and box["x"] + box["width"] <= 375, (selector, box)
    shoot(page, "jobs-dead-narrow")
