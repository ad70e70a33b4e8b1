"""The sans-I/O frame reader: lines, blocks, the line limit, positions kept until compact()."""
from __future__ import annotations

import pytest

from queue_server.protocol.framing import FrameReader, LineTooLong


def test_lines_end_at_lf_and_lose_a_cr_before_it():
    reader = FrameReader(100)
    reader.feed(b"PING\r\nPUT q 0 3\nab")
    assert reader.line() == b"PING"
    assert reader.line() == b"PUT q 0 3"
    assert reader.line() is None
    assert reader.unread() == 2


def test_a_cr_inside_a_line_stays_and_an_empty_line_is_empty():
    reader = FrameReader(100, b"a\rb\r\n\r\n\n")
    assert [reader.line(), reader.line(), reader.line(), reader.line()] == [b"a\rb", b"", b"", None]


def test_a_block_is_handed_out_only_once_all_of_it_is_here():
    reader = FrameReader(100)
    reader.feed(b"abc")
    assert reader.block(5) is None
    assert reader.position == 0
    reader.feed(b"de\n")
    assert reader.block(5) == b"abcde"
    assert reader.line() == b""


def test_a_line_of_exactly_the_limit_passes_even_when_its_cr_arrives_alone():
    reader = FrameReader(4)
    reader.feed(b"abcd\r")
    assert reader.line() is None
    reader.feed(b"\n")
    assert reader.line() == b"abcd"


@pytest.mark.parametrize("data", [b"abcde", b"abcd\rx", b"abcde\n", b"abcde\r\n"])
def test_a_line_past_the_limit_raises_as_soon_as_the_bytes_prove_it(data):
    reader = FrameReader(4)
    reader.feed(data)
    with pytest.raises(LineTooLong):
        reader.line()
    assert reader.position == 0


def test_without_a_limit_lines_of_any_length_pass():
    reader = FrameReader(None, b"x" * 100_000 + b"\n")
    assert reader.line() == b"x" * 100_000


def test_position_can_be_set_back_and_compact_drops_only_what_was_taken():
    reader = FrameReader(100, b"200 OK 2\r\nab")
    assert reader.line() == b"200 OK 2"
    assert reader.block(3) is None
    reader.position = 0  # the reply is incomplete: read it again once more bytes came
    reader.feed(b"c\r\nnext")
    assert reader.line() == b"200 OK 2"
    assert reader.block(2) == b"ab"
    reader.compact()
    assert bytes(reader.buffer) == b"c\r\nnext"
    assert reader.line() == b"c"
