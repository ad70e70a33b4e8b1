"""A web page cannot drive the queue server: real headless Chromium opens a page whose form
auto-submits a POST (text/plain body `SHUTDOWN`, and a PUT) to the queue port. The server
closes the connection at the request line: it keeps running and its state is unchanged.

Needs Debian's chromium at /usr/bin/chromium (as tests/admin_ui/test_browser.py).
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from polling import DEADLINE_S

from tests.admin_ui.browser_chromium import CHROMIUM, launched_browser, needs_chromium
from tests.queue_server.util import poll_until, total

pytestmark = needs_chromium

if CHROMIUM.exists():
    from playwright.sync_api import Browser


def attack_page(port: int) -> str:
    """A text/plain form sends `x=<value>` with CRLF line ends: the value's own first line
    break (the one after `<textarea>` is dropped by HTML) puts the PUT on a line of its own."""
    return f"""<!doctype html><html><body>
<form method="POST" action="http://127.0.0.1:{port}/" enctype="text/plain">
<textarea name="x">

PUT evil 0 1
xSHUTDOWN
</textarea></form>
<script>document.forms[0].submit();</script></body></html>"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched_browser() as launched:
        yield launched


def test_a_form_post_from_a_web_page_neither_stops_nor_changes_the_server(queue_server, browser):
    context = browser.new_context()
    page = context.new_page()
    try:
        page.set_content(attack_page(queue_server.port))
        poll_until(lambda: "cross-protocol" in queue_server.output_text(), timeout_s=DEADLINE_S,
                   what="the browser's POST refused")
    finally:
        context.close()
    assert queue_server.is_running()
    client = queue_server.connect()
    assert client.request(b"PING") == b"200 PONG"
    assert total(client) == (0, 0, 0, 0)
    assert "an HTTP POST request line" in queue_server.output_text()
