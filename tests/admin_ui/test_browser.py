"""The pages in headless Chromium against the real `slotmap admin` process: numbers, sorting, live refresh.

Needs Debian's chromium at /usr/bin/chromium (Playwright's own browser download is not used).
Screenshots go to tests/artifacts/.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import admin_sample
import pytest
from admin_proc import AdminProc, sample_admin
from admin_testing import FORMAT_CASES, poll_until
from browser_chromium import CHROMIUM, browser_page, needs_chromium, shoot
from sqlalchemy import insert
from sqlalchemy.orm import Session

from admin_ui.format import fmt
from manager.storage.db import QueueSample, make_engine

TOKEN = "browser-token"
REFRESH_S = 0.5
RED = "rgb(207, 34, 46)"
BLUE = "rgb(9, 105, 218)"

pytestmark = needs_chromium

if CHROMIUM.exists():
    from playwright.sync_api import Browser, Page


@pytest.fixture(scope="module")
def sample_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The sample hour ending now, so the pages show fresh data."""
    path = tmp_path_factory.mktemp("admin_browser") / "slotmap.db"
    return admin_sample.make_database(path, now=time.time())


@pytest.fixture(scope="module")
def admin(sample_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminProc]:
    root = tmp_path_factory.mktemp("admin_proc")
    with sample_admin(sample_url, root, "--refresh-s", str(REFRESH_S), token=TOKEN) as proc:
        yield proc


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page; afterwards, no request may have left this machine (no CDN)."""
    requested: list[str] = []
    with browser_page(browser) as opened:
        opened.on("request", lambda request: requested.append(request.url))
        yield opened
    remote = [url for url in requested if urlsplit(url).scheme in ("http", "https")
              and urlsplit(url).hostname != "127.0.0.1"]
    assert remote == []


def lookup(obj: Any, path: str) -> Any:
    for key in path.split(".") if path else []:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


CELLS_JS = """rows => rows.map(row => ({
    key: row.dataset.key,
    cells: Array.from(row.querySelectorAll('[data-field]')).map(c => ({
        field: c.dataset.field, fmt: c.dataset.fmt, text: c.textContent, trend: c.dataset.trend || null}))
}))"""


def table_cells(page: Page, selector: str) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = page.eval_on_selector_all(f"{selector} tbody tr[data-key]", CELLS_JS)
    return cells


def assert_rows_match(rows: list[dict[str, Any]], api_rows: dict[str, dict[str, Any]]) -> None:
    assert {row["key"] for row in rows} == set(api_rows)
    for row in rows:
        for cell in row["cells"]:
            value = lookup(api_rows[row["key"]], cell["field"])
            if value is None and cell["fmt"] == "cell":
                value = 0
            assert cell["text"] == fmt(value, cell["fmt"]), (row["key"], cell)


def shown_order(page: Page) -> list[str]:
    order: list[str] = page.eval_on_selector_all("#queues tbody tr", "rows => rows.map(r => r.dataset.key)")
    return order


def test_queues_page_shows_the_numbers_of_the_api(admin: AdminProc, page: Page) -> None:
    page.goto(admin.url + "/queues")
    api = {row["queue"]: row for row in admin.get("/api/queues").json()["queues"]}
    rows = table_cells(page, "#queues")
    assert_rows_match(rows, api)
    assert shown_order(page) == list(api)  # priority, biggest first: the API's default order too
    totals = admin.get("/api/queues").json()["totals"]
    shown_total = page.text_content("#queues tfoot [data-field=waiting]")
    assert shown_total == fmt(totals["waiting"], "int")
    assert admin_sample.CONFIGURED_ONLY in (page.text_content("#queues-live") or "")
    shoot(page, "queues")


def test_load_is_red_when_the_manager_wants_more_slots_and_blue_when_fewer(
    admin: AdminProc, page: Page,
) -> None:
    page.goto(admin.url + "/queues")
    color = "el => getComputedStyle(el).color"
    assert page.eval_on_selector("tr[data-key=mail_send] [data-field=load]", color) == RED
    assert page.eval_on_selector("tr[data-key=photo_resize] [data-field=load]", color) == BLUE
    assert page.eval_on_selector("tr[data-key=push_notify] [data-field=load]", color) not in (RED, BLUE)


def test_clicking_a_header_sorts_in_the_page_without_reloading(admin: AdminProc, page: Page) -> None:
    page.goto(admin.url + "/queues")
    page.evaluate("window.__stayed = true")
    page.click("#queues th[data-sort=load] a")
    by_load = [row["queue"] for row in admin.get("/api/queues?sort=load").json()["queues"]]
    assert shown_order(page) == by_load
    assert page.evaluate("window.__stayed") is True
    assert page.url.endswith("?sort=load&order=desc")
    assert page.get_attribute("#queues th[data-sort=load]", "aria-sort") == "descending"
    page.click("#queues th[data-sort=load] a")
    assert shown_order(page) == [row["queue"] for row in admin.get(
        "/api/queues?sort=load&order=asc").json()["queues"]]
    page.click("#queues th[data-sort=queue] a")
    assert shown_order(page) == sorted(by_load)
    shoot(page, "queues-sorted")


def test_without_javascript_the_header_link_sorts_on_the_server(admin: AdminProc, browser: Browser) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(admin.url + "/queues")
        page.click("#queues th[data-sort=waiting] a")
        page.wait_for_url("**/queues?sort=waiting&order=desc")
        api = admin.get("/api/queues?sort=waiting").json()["queues"]
        assert shown_order(page) == [row["queue"] for row in api]
        assert_rows_match(table_cells(page, "#queues"), {row["queue"]: row for row in api})
    finally:
        context.close()


def test_queue_page_shows_its_numbers_and_four_history_charts(admin: AdminProc, page: Page) -> None:
    page.goto(admin.url + "/queues/mail_send")
    detail = admin.get("/api/queues/mail_send").json()
    for cell in page.eval_on_selector_all("#queue-stats [data-field]",
                                          "cs => cs.map(c => [c.dataset.field, c.dataset.fmt, c.textContent])"):
        field, kind, text = cell
        assert text == fmt(detail["row"][field], kind), cell
    loaded = page.eval_on_selector_all(
        "img[data-chart]", "imgs => imgs.map(i => i.complete && i.naturalWidth > 0)")
    assert loaded == [True, True, True, True]
    assert_rows_match(table_cells(page, "#queue-hosts"), {row["host"]: row for row in detail["hosts"]})
    shoot(page, "queue-mail_send")


def test_slot_map_page_shows_the_matrix_and_host_memory_of_the_api(admin: AdminProc, page: Page) -> None:
    page.goto(admin.url + "/slotmap")
    api = admin.get("/api/slotmap").json()
    hosts = {row["host"]: row for row in api["hosts"]}
    assert_rows_match(table_cells(page, "#matrix"), hosts)
    assert_rows_match(table_cells(page, "#hosts"), hosts)
    columns = page.eval_on_selector_all("#matrix thead th.vertical", "ths => ths.map(t => t.textContent.trim())")
    assert columns == api["queues"]
    lost = page.get_attribute(f"#hosts tr[data-key={admin_sample.LOST_HOST}]", "class")
    assert lost == "lost"
    assert page.text_content("#matrix tfoot [data-field=total]") == fmt(api["total"], "int")
    shoot(page, "slotmap")


def test_events_page_filters_by_kind(admin: AdminProc, page: Page) -> None:
    page.goto(admin.url + "/events")
    every = admin.get("/api/events").json()["events"]
    assert page.locator("#events tbody tr").count() == len(every)
    page.select_option("select[name=kind]", "master_lost")
    page.click("#event-filter button[type=submit]")
    page.wait_for_url("**/events?kind=master_lost**")
    shown = page.eval_on_selector_all("#events tbody tr td:nth-child(2)", "tds => tds.map(t => t.textContent)")
    expected = admin.get("/api/events?kind=master_lost").json()["events"]
    assert shown == ["master_lost"] * len(expected) and expected
    shoot(page, "events-master_lost")


def test_an_admin_logs_in_and_pauses_a_queue_from_the_page(admin: AdminProc, page: Page) -> None:
    page.goto(admin.url + "/queues/search_index")
    page.click("#login-link")
    page.fill("input[name=token]", TOKEN)
    page.click("form.login button")
    page.wait_for_url("**/queues/search_index")
    page.click("#pause-toggle")
    page.wait_for_selector("text=Resume search_index")
    detail = admin.get("/api/queues/search_index").json()
    assert detail["override"]["paused"] is True
    assert detail["events"][0]["kind"] == "pause_requested" and detail["events"][0]["actor"] == "admin"
    page.fill("#min-slots", "3")
    page.fill("#max-slots", "12")
    page.click("form.limits button")
    page.wait_for_selector("text=min 3")
    override = admin.get("/api/queues/search_index").json()["override"]
    assert (override["min_slots"], override["max_slots"]) == (3, 12)
    shoot(page, "queue-search_index-paused")


def test_the_pages_script_formats_numbers_exactly_as_the_server(admin: AdminProc, page: Page) -> None:
    page.goto(admin.url + "/queues")
    cases = [[value, kind] for value, kind, _ in FORMAT_CASES]
    shown = page.evaluate("cases => cases.map(([v, kind]) => window.slotmapFormat(v, kind))", cases)
    assert shown == [fmt(value, kind) for value, kind, _ in FORMAT_CASES]


def test_the_api_docs_render_from_vendored_files(admin: AdminProc, page: Page) -> None:
    page.goto(admin.url + "/docs")
    page.wait_for_selector(".swagger-ui .opblock")
    paths = page.eval_on_selector_all(".opblock-summary-path", "els => els.map(e => e.textContent)")
    assert "/api/queues" in [path.replace("\u200b", "") for path in paths]


def test_open_pages_follow_new_samples_without_reloading(
    admin: AdminProc, page: Page, sample_url: str,
) -> None:
    page.goto(admin.url + "/queues")
    page.click("#queues th[data-sort=waiting] a")
    page.evaluate("window.__stayed = true")
    newest = admin.get("/api/queues").json()["at_unix"]
    rows = admin_sample.queue_rows(now=newest + 1, history_s=0)
    for row in rows:
        row["waiting"] = 99_999 if row["queue"] == "cache_purge" else row["waiting"]
    rows.append({**rows[0], "queue": "brand_new", "waiting": 5})
    engine = make_engine(sample_url)
    with Session(engine) as session:
        session.execute(insert(QueueSample), rows)
        session.commit()
    engine.dispose()
    poll_until(lambda: page.text_content("tr[data-key=cache_purge] [data-field=waiting]") == "99,999",
               deadline_s=10 * REFRESH_S + 5, what="the new waiting count on the open page")
    poll_until(lambda: page.locator("tr[data-key=brand_new]").count() == 1,
               deadline_s=10 * REFRESH_S + 5, what="the new queue's row")
    assert page.evaluate("window.__stayed") is True
    assert shown_order(page)[0] == "cache_purge"  # still sorted by waiting
    api = {row["queue"]: row for row in admin.get("/api/queues").json()["queues"]}
    assert_rows_match(table_cells(page, "#queues"), api)
    assert page.text_content("#live-status") == "live"
