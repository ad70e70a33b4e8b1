"""The dashboard's door against a real browser (headless Chromium) and a real `slotmap admin`:
a page of another origin can neither frame the dashboard nor post a change to it while the
browser is logged in; the dashboard's own form still works."""
from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from admin_proc import AdminProc, sample_admin
from browser_chromium import CHROMIUM, needs_chromium
from polling import DEADLINE_S, poll_until
from sqlalchemy.orm import Session

from manager.storage.db import QueueOverride, make_engine

TOKEN = "browser-guard-token"

pytestmark = needs_chromium

if CHROMIUM.exists():
    from playwright.sync_api import Browser, BrowserContext, Frame, Page


@pytest.fixture(scope="module")
def database_url(module_database_url: str) -> str:
    return module_database_url


@pytest.fixture(scope="module")
def admin(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminProc]:
    """One dashboard for the module: only the first test changes a queue (mail_send)."""
    with sample_admin(database_url, tmp_path_factory.mktemp("browser_guard"), token=TOKEN) as proc:
        yield proc


@pytest.fixture
def logged_in(browser: Browser, admin: AdminProc) -> Iterator[BrowserContext]:
    """A browser logged in to the dashboard (its session cookie set)."""
    context = browser.new_context()
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto(f"{admin.url}/login?next=/queues")
    page.fill('input[name="token"]', TOKEN)
    page.click('form.login [type="submit"]')
    page.wait_for_url(f"{admin.url}/queues")
    page.close()
    yield context
    context.close()


def override(database_url: str, queue: str) -> QueueOverride | None:
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            return session.get(QueueOverride, queue)
    finally:
        engine.dispose()


def test_a_form_posted_from_an_opaque_origin_changes_nothing(
    admin: AdminProc, logged_in: BrowserContext, database_url: str,
) -> None:
    attacker = logged_in.new_page()
    # A data: page has an opaque origin: its form posts carry `Origin: null`.
    html = (f'<form id="f" method="post" action="{admin.url}/queues/mail_send/pause"></form>'
            "<script>document.getElementById('f').submit()</script>")
    with attacker.expect_response(f"{admin.url}/queues/mail_send/pause") as answer:
        attacker.goto("data:text/html," + html)
    assert answer.value.status == 401
    assert override(database_url, "mail_send") is None
    # Chromium also says Sec-Fetch-Site: cross-site; a browser that does not is refused for
    # its Origin: null (tests/admin_ui/test_guard.py sends that alone).
    assert "refused POST /queues/mail_send/pause from 127.0.0.1: form posted from" in admin.log_text()
    # The dashboard's own button, in the same browser, works.
    own = logged_in.new_page()
    own.goto(f"{admin.url}/queues/mail_send")
    own.click("#pause-toggle")
    deadline = time.monotonic() + DEADLINE_S  # 10 s: too little room on a busy machine
    while override(database_url, "mail_send") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    found = override(database_url, "mail_send")
    assert found is not None and found.paused


def navigated_children(page: Page) -> list[Frame]:
    """The page's frames once each has left its initial empty document, else []."""
    children = [frame for frame in page.frames if frame != page.main_frame]
    return children if children and all(frame.url not in ("", "about:blank") for frame in children) else []


def test_another_origin_cannot_frame_the_dashboard(admin: AdminProc, logged_in: BrowserContext) -> None:
    attacker = logged_in.new_page()
    # An about:blank page of its own (a data: page's frames fail for reasons of their own).
    attacker.set_content(f'<iframe id="victim" src="{admin.url}/queues"></iframe>')
    # A refused frame load has no event of its own: wait until the frame has gone somewhere
    # (Chromium's error page when refused, the dashboard when not) and loaded there.
    children = poll_until(lambda: navigated_children(attacker), what="the frame navigated")
    for frame in children:
        frame.wait_for_load_state("load")
    framed = [frame.content() for frame in attacker.frames if frame != attacker.main_frame]
    assert framed and not any("Slotmap admin" in content for content in framed), framed
    # The same page opened directly shows the queues.
    direct = logged_in.new_page()
    direct.goto(f"{admin.url}/queues")
    assert direct.locator("h1").first.inner_text()
