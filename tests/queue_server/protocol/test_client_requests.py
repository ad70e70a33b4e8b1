"""Request encoding of the clients: names and numbers checked before anything is sent."""
from __future__ import annotations

import pytest

from queue_server.protocol import requests as req
from queue_server.protocol.numbers import MAX_SECONDS


def test_plain_put_is_the_sockpqd_line_and_the_data() -> None:
    assert req.put_request("q", b"hello", priority_=-5) == b"PUT q -5 5\r\nhello"


def test_str_data_is_sent_as_utf8_with_its_byte_length() -> None:
    assert req.put_request("q", "é") == b"PUT q 0 2\r\n\xc3\xa9"


def test_put_keywords_follow_the_sockpqd_order_and_delay_comes_last() -> None:
    request = req.put_request(
        "q", b"x", new_item=True, wait_queue="out", expire_s=2.5, then="done", delay_s=1
    )
    assert request == b"PUT q 0 1 NEW WAIT out EXPIRE 2.5 THEN DONE DELAY 1\r\nx"
    assert req.put_request("q", b"", item="it") == b"PUT q 0 0 IS it\r\n"


@pytest.mark.parametrize("bad", ["a b", "q\r\nSHUTDOWN", "", "x" * 129, "é", "a|b"])
def test_a_name_that_could_split_the_stream_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="name"):
        req.put_request(bad, b"x")


def test_wait_without_an_item_and_then_without_expire_are_refused() -> None:
    with pytest.raises(ValueError, match="WAIT"):
        req.put_request("q", b"x", wait_queue="out")
    with pytest.raises(ValueError, match="THEN"):
        req.get_request("q", then="done")
    with pytest.raises(ValueError, match="not both"):
        req.put_request("q", b"x", item="i", new_item=True)


def test_priority_outside_signed_64_bits_is_refused() -> None:
    with pytest.raises(ValueError, match="64-bit"):
        req.put_request("q", b"x", priority_=2**63)
    assert req.put_request("q", b"", priority_=-(2**63)).startswith(b"PUT q -9223372036854775808 ")


def test_seconds_are_written_without_exponent_and_negative_ones_refused() -> None:
    assert req.seconds(0, what="t") == b"0"
    assert req.seconds(1.25, what="t") == b"1.25"
    assert req.seconds(3.0, what="t") == b"3"
    assert req.seconds(1e-5, what="t") == b"0.00001"
    with pytest.raises(ValueError, match=r"0\.\.10000000000 seconds"):
        req.seconds(-1, what="t")
    with pytest.raises(ValueError, match="finite"):
        req.seconds(float("inf"), what="t")
    assert req.seconds(MAX_SECONDS, what="t") == b"10000000000"
    with pytest.raises(ValueError, match=r"0\.\.10000000000 seconds"):  # the server's bound
        req.seconds(MAX_SECONDS + 1, what="t")


def test_get_request_names_the_verb_queues_count_and_expiry() -> None:
    assert req.get_request() == b"GET\r\n"
    assert req.get_request(["a", "b"], block=True) == b"GETB a|b\r\n"
    assert req.get_request("q", count=10, expire_s=60, then="later", block="until_empty") == (
        b"GETBE q COUNT 10 EXPIRE 60 THEN LATER\r\n"
    )
    with pytest.raises(ValueError, match="count"):
        req.get_request("q", count=0)


def test_done_and_later_name_every_id_in_one_line() -> None:
    assert req.done_request([1, 22, 333]) == b"DONE 1 22 333\r\n"
    assert req.later_request([4, 5], delay_s=0.5) == b"LATER 4 5 DELAY 0.5\r\n"
    with pytest.raises(ValueError, match="at least one"):
        req.done_request([])
    with pytest.raises(ValueError, match="positive"):
        req.done_request([0])


def test_put_many_request_is_the_plain_puts_back_to_back() -> None:
    assert req.put_many_request("q", [b"a", "bc"], priority_=2) == (
        b"PUT q 2 1\r\naPUT q 2 2\r\nbc"
    )


def test_servers_parse_from_a_comma_list_or_a_sequence_in_order() -> None:
    assert req.parse_servers("h1:1,h2:2") == [("h1", 1), ("h2", 2)]
    assert req.parse_servers(["[::1]:7400"]) == [("::1", 7400)]
    with pytest.raises(ValueError, match="HOST:PORT"):
        req.parse_servers("nohost")


def test_lowest_server_id_ranks_first_and_unknown_ids_rank_last_in_list_order() -> None:
    assert req.rank_servers([3, None, 1, 2, None]) == [2, 3, 0, 1, 4]
    assert req.rank_servers([1, 1]) == [0, 1]


def test_a_token_with_a_space_or_line_break_is_refused() -> None:
    assert req.auth_request("s3cret") == b"AUTH s3cret\r\n"
    with pytest.raises(ValueError, match="token"):
        req.auth_request("a b")
