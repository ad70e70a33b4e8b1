"""The primary's times cut to microseconds (records.micro_time): the text a record carries
parses back to the very float the primary keeps, so a replica and a replay agree to the bit."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from queue_server.protocol.numbers import parse_unix_time
from queue_server.server import records


@given(st.floats(min_value=0.0, max_value=8_000_000_000.0))  # micro < 2**53 up to year 2223
def test_a_micro_time_parses_back_to_the_float_the_primary_keeps(clock: float) -> None:
    kept, text = records.micro_time(clock)
    assert parse_unix_time(text) == kept == float(text)
    assert abs(kept - clock) < 2e-6  # cut, not moved
    assert records.time_text(kept) == repr(kept).encode()  # a replica's own record of it
    assert parse_unix_time(records.time_text(kept)) == kept


def test_the_hot_done_record_carries_the_micro_time_text() -> None:
    kept, text = records.micro_time(1_764_383_000.1234567)
    assert text == b"1764383000.123456" and kept == 1764383000.123456
    assert records.done([42], text) == b"SYNC DONE 42 AT 1764383000.123456\r\n"
