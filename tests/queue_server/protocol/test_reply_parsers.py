"""The pure reply parsers of the client: whole replies, partial buffers, error statuses."""
from __future__ import annotations

import json
from typing import TypeVar

import pytest

from queue_server.protocol.client_errors import AuthError, BadReply, OfflineError, QueueServerError
from queue_server.protocol.replies import DoneResult, Job, RunningJob, Total
from queue_server.protocol.reply_parsers import (
    done_parser,
    later_parser,
    parse_get,
    parse_holding,
    parse_interconnect,
    parse_job,
    parse_ok,
    parse_put,
    parse_stats,
    parse_total,
    parse_wait_ack,
    runlist_parser,
)
from queue_server.protocol.reply_reading import NEED_MORE, NeedMore, Parser, ReplyBuffer, error_for

T = TypeVar("T")

STATS_BODY = json.dumps({
    "q": {"ready": 3, "delayed": 1, "running": 2, "put": 9, "done": 4, "later": 1, "expired": 0,
          "by_priority": {"5": 1, "0": 3}, "oldest_ready_age_s": 1.5, "future_key": True},
}).encode()


def parsed(parse: Parser[T], data: bytes) -> tuple[T | NeedMore, int]:
    """The reply at the start of `data` (NEED_MORE while incomplete) and how many bytes it took."""
    replies = ReplyBuffer()
    replies.feed(data)
    value = replies.take(parse)
    return value, len(data) - replies.pending


def complete(got: tuple[T | NeedMore, int]) -> tuple[T, int]:
    value, end = got
    assert not isinstance(value, NeedMore), "the parser wants more bytes"
    return value, end


def test_lines_end_with_crlf_or_a_bare_lf() -> None:
    replies = ReplyBuffer()
    replies.feed(b"200 OK\r\n404 Queue Empty\nrest")
    assert replies.take(parse_put) is None
    assert replies.take(parse_get) == []
    assert replies.take(parse_get) is NEED_MORE
    assert replies.pending == 4


def test_a_run_of_bytes_longer_than_any_line_without_lf_is_a_bad_reply() -> None:
    replies = ReplyBuffer()
    replies.feed(b"x" * 70_000)
    with pytest.raises(BadReply):
        replies.take(parse_ok)


def test_put_reply_is_none_for_plain_ok_and_the_item_for_new() -> None:
    assert parsed(parse_put, b"200 OK\r\n") == (None, 8)
    assert parsed(parse_put, b"200 OK IS _17\r\n") == ("_17", 15)
    assert parsed(parse_put, b"200 O")[0] is NEED_MORE


def test_get_reply_gives_the_job_with_its_item_and_data_that_contains_crlf() -> None:
    reply = b"200 OK q 7 -3 6 IS it\r\na\r\nb\r\nNEXT"
    jobs, end = complete(parsed(parse_get, reply))
    assert jobs == [Job("q", 7, -3, b"a\r\nb\r\n", "it")]
    assert reply[end:] == b"NEXT"


def test_get_reply_waits_for_the_whole_data_block() -> None:
    reply = b"200 OK q 1 0 5\r\nhello"
    for cut in range(len(reply)):
        assert parsed(parse_get, reply[:cut])[0] is NEED_MORE
    assert parsed(parse_get, reply) == ([Job("q", 1, 0, b"hello")], len(reply))


def test_queue_empty_is_an_empty_list() -> None:
    assert parsed(parse_get, b"404 Queue Empty\r\n") == ([], 17)


def test_batch_reply_gives_every_job_in_order() -> None:
    reply = b"200 OK 3 JOBS\r\na 1 5 2\r\nxyb 2 0 0 IS i1\r\nc 3 -1 1\r\nz"
    jobs, end = complete(parsed(parse_get, reply))
    assert jobs == [Job("a", 1, 5, b"xy"), Job("b", 2, 0, b"", "i1"), Job("c", 3, -1, b"z")]
    assert end == len(reply)


def test_batch_reply_cut_anywhere_is_incomplete() -> None:
    reply = b"200 OK 2 JOBS\r\na 1 5 2\r\nxyb 2 0 3\r\nabc"
    assert all(parsed(parse_get, reply[:cut])[0] is NEED_MORE for cut in range(len(reply)))


def test_offline_status_raises_offline_error_after_skipping_its_line() -> None:
    buffer = ReplyBuffer()
    buffer.feed(b"500 Offline Mode\r\n200 OK\r\n")
    with pytest.raises(OfflineError) as caught:
        buffer.take(parse_get)
    assert (caught.value.code, caught.value.text) == (500, "Offline Mode")
    assert buffer.take(parse_put) is None
    assert buffer.pending == 0


def test_status_lines_map_to_the_error_classes() -> None:
    assert isinstance(error_for(b"401 Auth Required"), AuthError)
    assert isinstance(error_for(b"401 Unauthorized"), AuthError)
    assert isinstance(error_for(b"500 Offline Mode"), OfflineError)
    invalid = error_for(b"500 Invalid Snapshot")
    assert type(invalid) is QueueServerError and invalid.code == 500
    bad = error_for(b"400 Bad Request: bad queue name")
    assert (bad.code, bad.text) == (400, "Bad Request: bad queue name")
    assert isinstance(error_for(b"hello"), BadReply)


def test_done_reply_has_one_result_per_id_with_finq_and_fini() -> None:
    reply = b"200 OK\r\n200 OK FINQ\r\n404 Job Not Found\r\n200 OK FINQ FINI\r\n200 OK FINI\r\n"
    results, end = complete(parsed(done_parser(5), reply))
    assert results == [
        DoneResult(True, False, False),
        DoneResult(True, True, False),
        DoneResult(False, False, False),
        DoneResult(True, True, True),
        DoneResult(True, False, True),
    ]
    assert end == len(reply)


def test_done_reply_waits_for_every_line() -> None:
    assert parsed(done_parser(2), b"200 OK\r\n")[0] is NEED_MORE


def test_one_error_line_refuses_a_whole_multi_id_done() -> None:
    buffer = ReplyBuffer()
    buffer.feed(b"500 Offline Mode\r\n200 PONG\r\n")
    with pytest.raises(OfflineError):
        buffer.take(done_parser(3))
    assert buffer.take(parse_ok) == "PONG"


def test_an_error_line_after_per_id_lines_is_a_bad_reply() -> None:
    with pytest.raises(BadReply):
        parsed(done_parser(2), b"200 OK\r\n400 Bad Request: x\r\n")


def test_later_reply_says_per_id_whether_the_job_was_running() -> None:
    assert parsed(later_parser(2), b"200 OK\r\n404 Job Not Found\r\n") == ([True, False], 27)


def test_total_reply_gives_the_four_counts() -> None:
    assert parsed(parse_total, b"200 OK 2 3 10 4\r\n") == (Total(2, 3, 10, 4), 17)


def test_total_with_a_missing_count_is_a_bad_reply() -> None:
    buffer = ReplyBuffer()
    buffer.feed(b"200 OK 2 3 10\r\n")
    with pytest.raises(BadReply):
        buffer.take(parse_total)


def test_stats_reply_gives_typed_per_queue_counters_and_ignores_unknown_keys() -> None:
    reply = b"200 OK %d\r\n" % len(STATS_BODY) + STATS_BODY
    stats, end = complete(parsed(parse_stats, reply))
    q = stats["q"]
    assert (q.queue, q.ready, q.delayed, q.running, q.put, q.done, q.later, q.expired) == (
        "q", 3, 1, 2, 9, 4, 1, 0)
    assert q.by_priority == {5: 1, 0: 3}
    assert q.oldest_ready_age_s == 1.5
    assert end == len(reply)
    assert parsed(parse_stats, reply[:-1])[0] is NEED_MORE


def test_stats_entry_without_a_counter_is_a_bad_reply() -> None:
    body = b'{"q": {"ready": 1}}'
    buffer = ReplyBuffer()
    buffer.feed(b"200 OK %d\r\n" % len(body) + body)
    with pytest.raises(BadReply):
        buffer.take(parse_stats)


def test_interconnect_reply_gives_the_server_id() -> None:
    assert parsed(parse_interconnect, b"200 OK 3\r\n") == (3, 10)


def test_wait_ack_gives_the_new_item_then_the_output_job_follows() -> None:
    reply = b"206 Wait for output IS _4\r\n200 OK out 9 0 2 IS _4\r\nok"
    replies = ReplyBuffer()
    replies.feed(reply)
    assert replies.take(parse_wait_ack) == "_4"
    assert replies.take(parse_job) == Job("out", 9, 0, b"ok", "_4")
    assert replies.pending == 0
    assert parsed(parse_wait_ack, b"206 Wait for output\r\n") == (None, 21)


def test_runlist_reply_gives_lengths_expiry_and_data_blocks_in_order() -> None:
    reply = b"200 OK 2\r\n5 q 0 3 EXPIRE 1700000000.25\r\n6 r -2 1\r\nabcZ"
    jobs, end = complete(parsed(runlist_parser(with_data=True), reply))
    assert jobs == [
        RunningJob(5, "q", 0, 3, 1700000000.25, b"abc"),
        RunningJob(6, "r", -2, 1, None, b"Z"),
    ]
    assert end == len(reply)
    plain, _ = complete(parsed(runlist_parser(with_data=False), b"200 OK 1\r\n5 q 0 EXPIRE 12\r\n"))
    assert plain == [RunningJob(5, "q", 0, None, 12.0, None)]


def test_reply_buffer_gives_the_same_replies_however_the_bytes_are_split() -> None:
    stream = (b"200 OK\r\n200 OK IS _1\r\n200 OK 2 JOBS\r\nq 1 0 3\r\nabcq 2 0 1 IS x\r\nd"
              b"404 Queue Empty\r\n200 OK 1 0 0 1\r\n")
    parsers = [parse_put, parse_put, parse_get, parse_get, parse_total]
    expected = [None, "_1", [Job("q", 1, 0, b"abc"), Job("q", 2, 0, b"d", "x")], [], Total(1, 0, 0, 1)]
    for cut in range(1, len(stream)):
        buffer = ReplyBuffer()
        got = []
        chunks = [stream[:cut], stream[cut:]]
        for parse in parsers:
            value = buffer.take(parse)
            while value is NEED_MORE:
                buffer.feed(chunks.pop(0))
                value = buffer.take(parse)
            got.append(value)
        assert got == expected, f"split at {cut}"
        assert buffer.pending == 0


def test_a_job_header_with_a_non_numeric_id_is_a_bad_reply() -> None:
    buffer = ReplyBuffer()
    buffer.feed(b"200 OK q x 0 1\r\na")
    with pytest.raises(BadReply):
        buffer.take(parse_get)


def test_job_text_and_json_decode_the_data() -> None:
    job = Job("q", 1, 0, '{"a": "é"}'.encode())
    assert job.text == '{"a": "é"}'
    assert job.json() == {"a": "é"}


@pytest.mark.parametrize(("role", "holding"), [
    (b"200 OK primary waiting 0 3 2 held - 12", True),  # held for its replicas
    (b"200 OK primary refusing 0 3 0 unmanaged - 12", True),  # until a replica confirms
    (b"200 OK primary asking 0 3 2 held - 12", True),  # until the manager consents
    (b"200 OK primary waiting 0 3 2 lapsed - 12", False),  # cut off: another may be promoted
    (b"200 OK replica sync 1 0 2 unmanaged - 12", False),  # deposed: told to follow
    (b"400 Unknown Command", True),  # a server without ROLE: it answered
])
def test_role_says_whether_a_server_may_still_send_a_reply_it_holds(role: bytes, holding: bool) -> None:
    assert parsed(parse_holding, role + b"\r\n") == (holding, len(role) + 2)
