"""The setup-error note a slot writes before exiting SETUP_FAILED: bounded both ways."""
from __future__ import annotations

import pytest

from slot.setup_notes import (
    MAX_ERROR_CHARS,
    MAX_TRACEBACK_CHARS,
    describe,
    is_setup_error_line,
    parse_setup_error,
    setup_error_note,
)


def _raised(message: str) -> BaseException:
    try:
        raise ValueError(message)
    except ValueError as exc:
        return exc


def test_a_note_keeps_the_errors_head_and_the_tracebacks_tail() -> None:
    error = describe(_raised("x" * 10_000), handler="app.Thumbs")
    assert len(error.error) == MAX_ERROR_CHARS and error.error.startswith("ValueError: xxx")
    assert len(error.traceback) <= MAX_TRACEBACK_CHARS and error.traceback.endswith("x")
    line = setup_error_note(error)
    assert line.endswith(b"\n") and b"\n" not in line[:-1] and is_setup_error_line(line)
    assert parse_setup_error(line[:-1]) == error


def test_a_note_from_a_peer_is_bounded_again_and_a_bad_one_refused() -> None:
    forged = b'E {"handler": "h", "error": "%s", "traceback": "%s"}' % (b"e" * 9000, b"t" * 9000)
    error = parse_setup_error(forged)
    assert len(error.error) == MAX_ERROR_CHARS and len(error.traceback) == MAX_TRACEBACK_CHARS
    with pytest.raises(ValueError):
        parse_setup_error(b'E {"error": 1}')
    with pytest.raises(ValueError):
        parse_setup_error(b"E not json")
