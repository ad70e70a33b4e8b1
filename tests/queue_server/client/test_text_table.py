"""The `slotmap` commands' tables (queue_server/client/text_table.py): columns as wide as their
widest cell, numbers right, long trailing text unpadded."""
from __future__ import annotations

from queue_server.client.text_table import text_table


def test_each_column_is_as_wide_as_its_widest_cell_and_numbers_align_right() -> None:
    table = text_table(("queue", "ready"), [["a_long_queue_name", "7"], ["q", "12345678"]], right={1})
    assert table == ("queue                 ready\n"
                     "a_long_queue_name         7\n"
                     "q                  12345678\n")


def test_columns_past_the_aligned_ones_follow_as_they_are_without_trailing_blanks() -> None:
    table = text_table(("key", "n", "error"), [["k1", "1", "ValueError: bad"], ["key-22", "10", ""]],
                       right={1}, aligned=2)
    assert table == ("key      n  error\n"
                     "k1       1  ValueError: bad\n"
                     "key-22  10\n")
