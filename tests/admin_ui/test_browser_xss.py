"""Hostile strings in every field of every page, in headless Chromium: no script of theirs runs (issue 16).

The manager's history holds a hostile string in every text column (host and queue names,
event kinds, actors, messages and details, a batch-size source); the queue server holds
jobs whose data and errors are hostile; the pulsar is down, so the limiter shows its error.
Each page is opened logged in (action forms shown), the live refresh swaps a region in,
and the page must have no inline script, no `on*` attribute, no `window.__xss`, no dialog,
and show the hostile text as text.

Needs Debian's chromium at /usr/bin/chromium, like test_browser.py.
"""
from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import hostile_strings
import pytest
from admin_proc import AdminProc, start_admin
from admin_testing import poll_until
from browser_chromium import CHROMIUM, needs_chromium
from hostile_strings import MARKER, NAMES, PAYLOADS, SCHEDULE
from procs import free_port, server_proc
from sqlalchemy import insert
from sqlalchemy.orm import Session

from manager.storage.db import Event, make_engine
from queue_server.client import QueueClient

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
TOKEN = "xss-token"
REFRESH_S = 0.5
# Names the queue page's route can take (a `/` would be another route).
ROUTABLE = [name for name in NAMES if "/" not in name]

pytestmark = needs_chromium

if CHROMIUM.exists():
    from playwright.sync_api import Browser, BrowserContext, Dialog, Page
    from playwright.sync_api import Error as PlaywrightError

# Every element's attributes: any named on* is an injected handler (the pages have none).
HANDLERS_JS = """() => Array.from(document.querySelectorAll('*')).flatMap(el =>
    Array.from(el.attributes).filter(a => a.name.toLowerCase().startsWith('on'))
        .map(a => `${el.tagName}[${a.name}=${a.value}]`))"""
INLINE_SCRIPTS_JS = """() => Array.from(document.querySelectorAll('script'))
    .filter(s => !s.src || new URL(s.src).pathname !== '/static/app.js').map(s => s.outerHTML)"""


@dataclass
class Hostile:
    admin: AdminProc
    database_url: str


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    root = tmp_path_factory.mktemp("xss")
    database_url = hostile_strings.database(root)
    queue_server = server_proc.start_queue_server(root, "--fsync", "never")
    try:
        with QueueClient(str(queue_server.address)) as client:
            for i, text in enumerate(PAYLOADS):
                client.put_job("photos", text.encode(), key=f"dead-{i}")
                client.put_job("photos", text.encode(), key=f"failed-{i}")
            for job in client.get("photos", count=2 * len(PAYLOADS), keys=True):
                key = job.key or ""
                error = f"Traceback:\n{PAYLOADS[int(key.rsplit('-', 1)[1])]}"
                client.fail(job.id, error, dead=key.startswith("dead-"))
            for i, text in enumerate(PAYLOADS):
                client.put_job("photos", text.encode(), key=f"ready-{i}")
        config = root / "cluster.toml"
        config.write_text(
            f'[queue_server]\nlisten = "{queue_server.address}"\n\n'
            f'[manager]\ndatabase_url = "{database_url}"\n\n'
            f'[admin]\ntoken = "{TOKEN}"\n\n'
            # Nothing listens here: the limiter shows the pulsar's error.
            f'[pulsar]\nlisten = "tcp://127.0.0.1:{free_port()}"\n\n'
            '[queues.photos]\nmax_slots = 4\nrate_limit = { permits = 5, period_s = 1.0 }\n\n'
            f'[schedules.{SCHEDULE}]\nqueue = "photos"\nevery_s = 3600\ndata = {json.dumps(PAYLOADS[0])}\n'
        )
        admin = start_admin(config, root, "--refresh-s", str(REFRESH_S))
        try:
            yield Hostile(admin, database_url)
        finally:
            admin.stop_later()
    finally:
        queue_server.kill()


@pytest.fixture(scope="module")
def logged_in(browser: Browser, hostile: Hostile) -> Iterator[BrowserContext]:
    """One context logged in once for the module (the action forms carry queue names too):
    the tests only read, each on a page of its own. Alert and friends mark a run."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    context.add_init_script("for (const f of ['alert', 'confirm', 'prompt']) "
                            "window[f] = (...a) => { window.__xss = f + ':' + a.join(','); };")
    with watched(context) as login:
        login.goto(f"{hostile.admin.url}/login?next=/queues")
        login.fill("input[name=token]", TOKEN)
        login.click("form.login button[type=submit]")
        login.wait_for_url(f"{hostile.admin.url}/queues")
    yield context
    context.close()


@contextlib.contextmanager
def watched(context: BrowserContext) -> Iterator[Page]:
    """A new page of `context`, closed at the end, which must have opened no dialog."""
    opened = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    opened.on("dialog", on_dialog)
    yield opened
    opened.close()
    assert dialogs == []


@pytest.fixture
def page(logged_in: BrowserContext) -> Iterator[Page]:
    with watched(logged_in) as opened:
        yield opened


def assert_inert(page: Page, what: str) -> None:
    """Nothing ran, even after a hover over every titled cell and a Tab (handlers that wait
    for the user), and nothing is there to run: no injected handler, no inline script."""
    for cell in page.locator("[title]").all()[:60]:
        try:
            cell.hover(timeout=2_000, force=True)
        except PlaywrightError as exc:
            # The live refresh (every REFRESH_S) swapped the region out between the listing and
            # the hover: that cell is gone, not run. Anything else is a failure.
            if "not visible" not in str(exc) and "not attached" not in str(exc):
                raise
    page.keyboard.press("Tab")
    assert page.evaluate("typeof window.__xss") == "undefined", (what, page.evaluate("window.__xss"))
    assert page.evaluate(HANDLERS_JS) == [], what
    assert page.evaluate(INLINE_SCRIPTS_JS) == [], what
    assert page.locator("img[src=x], svg[onload]").count() == 0, what


def pages() -> list[str]:
    listed = ["/queues", "/queues?sort=queue&order=asc", "/slotmap", "/events", "/events?group=false",
              "/queues/photos", "/queues/photos?range=6h"]
    listed += [f"/queues/{quote(name, safe='')}" for name in ROUTABLE]
    listed += [f"/events?host={quote(text, safe='')}&queue={quote(text, safe='')}" for text in PAYLOADS[:2]]
    listed += [f"/queues/photos/jobs?state={state}" for state in ("ready", "failed", "dead", "delayed")]
    listed += ["/jobs/dead-0", "/jobs/failed-3", "/jobs/ready-5", "/schedules"]
    # Pages that echo what they were asked: an unknown queue's message page, a bad filter.
    listed += [f"/queues/{quote(PAYLOADS[0], safe='')}x", f"/events?kind={quote(PAYLOADS[3], safe='')}"]
    return listed


@pytest.mark.parametrize("path", pages())
def test_no_hostile_string_runs_on_the_page(hostile: Hostile, page: Page, path: str) -> None:
    page.goto(hostile.admin.url + path)
    page.wait_for_load_state("load")
    assert_inert(page, path)


def test_hostile_strings_show_as_text_on_the_events_page_and_slot_map(hostile: Hostile, page: Page) -> None:
    for path, selector in (("/events", "#events"), ("/slotmap", "#hosts"), ("/queues", "#queues")):
        page.goto(hostile.admin.url + path)
        text = page.text_content(selector) or ""
        assert MARKER in text, path
        assert "{{7*7}}" in text, path  # shown as written, not evaluated
    # An event row's detail is its title, whole: the JSON with the payload in it.
    page.goto(hostile.admin.url + "/events?kind=slots_moved")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "xss-events.png"), full_page=True)
    titles = page.eval_on_selector_all("#events td[title]", "cells => cells.map(c => c.title)")
    assert any(MARKER.replace('"', '\\"') in title for title in titles), titles[:3]
    assert all(title.startswith("{") and title.endswith("}") for title in titles), titles[:3]


def test_a_job_with_hostile_data_and_error_shows_them_as_text(hostile: Hostile, page: Page) -> None:
    page.goto(hostile.admin.url + "/jobs/dead-0")
    assert page.text_content("#job-data") == PAYLOADS[0]
    assert PAYLOADS[0] in (page.text_content("#job-error") or "")
    assert_inert(page, "/jobs/dead-0")


def test_the_charts_opened_as_documents_run_nothing(hostile: Hostile, page: Page) -> None:
    """An SVG opened on its own is a document whose scripts would run (in an <img> they do not)."""
    for name in ROUTABLE[:2]:
        for chart in ("slots", "load", "jobs"):
            response = page.goto(f"{hostile.admin.url}/queues/{quote(name, safe='')}/charts/{chart}.svg")
            assert response is not None
            if response.status != 200:
                continue
            assert page.evaluate("typeof window.__xss") == "undefined", (name, chart)
            assert page.evaluate(HANDLERS_JS) == [], (name, chart)


def test_a_live_refresh_that_swaps_in_hostile_rows_runs_nothing(hostile: Hostile, page: Page) -> None:
    page.goto(hostile.admin.url + "/events")
    before = page.locator("#events tbody tr").count()
    engine = make_engine(hostile.database_url)
    try:
        with Session(engine) as session:
            session.execute(insert(Event), [
                {"at_unix": time.time(), "kind": "slots_moved", "queue": text, "host": text, "actor": text,
                 "message": text, "detail": {"moves": [{"host": text}]}} for text in PAYLOADS])
            session.commit()
    finally:
        engine.dispose()
    # The script sees new rows in the API and swaps the region for a fresh server render.
    poll_until(lambda: page.locator("#events tbody tr").count() > before, deadline_s=30.0,
               what="the new rows swapped in")
    assert_inert(page, "/events after a live swap")
