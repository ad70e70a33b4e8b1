"""Debian's Chromium for the dashboard's browser tests: where it is, how it starts, and the
skip (with how to install it) where it is missing."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="browser tests need Debian's chromium at /usr/bin/chromium: apt-get install -y chromium",
)


@contextlib.contextmanager
def launched_browser() -> Iterator[Browser]:
    """A headless Chromium, closed at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
