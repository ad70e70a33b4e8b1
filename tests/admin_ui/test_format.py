"""Number formats of the pages (static/app.js mirrors them; test_browser compares the two)."""
from __future__ import annotations

import math

import pytest
from admin_testing import FORMAT_CASES

from admin_ui.format import DASH, LOAD_INFINITE, fmt, json_text, path_segment
from manager.storage.samples import MAX_STORED_LOAD


@pytest.mark.parametrize(("value", "kind", "shown"), FORMAT_CASES)
def test_numbers_are_shown_in_their_kinds_format(value: float | None, kind: str, shown: str) -> None:
    assert fmt(value, kind) == shown


def test_the_infinite_load_is_the_one_the_manager_stores() -> None:
    assert LOAD_INFINITE == MAX_STORED_LOAD


@pytest.mark.parametrize(("value", "kind", "shown"), [
    (math.nan, "int", DASH), (math.inf, "secs", DASH), (-math.inf, "bytes", DASH),
    (math.inf, "pct", "\u221e"), (math.nan, "pct", DASH), (1e20, "time", DASH), (-1e20, "time", DASH),
    (math.nan, "age", DASH),
])
def test_a_number_no_format_can_show_is_a_dash_not_a_failed_page(value: float, kind: str, shown: str) -> None:
    assert fmt(value, kind) == shown


def test_json_text_is_plain_text_for_the_engine_to_escape() -> None:
    text = json_text({"host": '"><b>', "n": 1})
    assert text == '{"host": "\\"><b>", "n": 1}'
    assert not hasattr(text, "__html__")  # not Markup: autoescape escapes it in an attribute
    assert json_text({"x": "y" * 5000}).endswith("\u2026") and len(json_text({"x": "y" * 5000})) == 2001


def test_a_name_in_a_link_is_one_path_segment() -> None:
    assert path_segment("../logout") == "..%2Flogout"
    assert path_segment('q"><') == "q%22%3E%3C"
    assert path_segment("mail_send") == "mail_send"
