"""Number formats of the pages (static/app.js mirrors them; test_browser compares the two)."""
from __future__ import annotations

import pytest
from admin_testing import FORMAT_CASES

from admin_ui.format import LOAD_INFINITE, fmt
from manager.store import MAX_STORED_LOAD


@pytest.mark.parametrize(("value", "kind", "shown"), FORMAT_CASES)
def test_numbers_are_shown_in_their_kinds_format(value: float | None, kind: str, shown: str) -> None:
    assert fmt(value, kind) == shown


def test_the_infinite_load_is_the_one_the_manager_stores() -> None:
    assert LOAD_INFINITE == MAX_STORED_LOAD
