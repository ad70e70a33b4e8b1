"""What both clients share without I/O: put_many's pipeline and tally, refusals as values."""
from __future__ import annotations

import pytest

from queue_server.client import put_many
from queue_server.protocol.client_errors import BadReply, OfflineError, QueueServerError
from queue_server.protocol.reply_parsers import parse_put_outcome, parse_server_id
from queue_server.protocol.reply_reading import ReplyBuffer


def test_put_many_sends_each_chunk_before_reading_the_replies_of_the_one_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(put_many, "PUT_MANY_CHUNK", 2)
    batch = put_many.PutMany("q", [b"a", b"b", b"c"], priority=0)
    assert list(batch.steps()) == [
        (b"PUT q 0 1\r\naPUT q 0 1\r\nb", 0),
        (b"PUT q 0 1\r\nc", 2),
        (b"", 1),
    ]


def test_put_many_counts_the_stored_and_raises_the_first_refusal_at_the_end() -> None:
    batch = put_many.PutMany("q", [b"a", b"b", b"c"], priority=0)
    first, second = OfflineError(500, "Offline Mode"), QueueServerError(400, "Bad Request")
    for outcome in (None, first, second):
        batch.add(outcome)
    assert batch.what() == "put_many (1 of 3 acknowledged)"
    with pytest.raises(OfflineError) as raised:
        batch.result()
    assert raised.value is first


def test_a_refused_put_is_a_value_and_the_buffer_moves_past_it() -> None:
    replies = ReplyBuffer()
    replies.feed(b"200 OK\r\n500 Offline Mode\r\n200 OK IS _3\r\n")
    assert replies.take(parse_put_outcome) is None
    refused = replies.take(parse_put_outcome)
    assert isinstance(refused, OfflineError)
    assert replies.take(parse_put_outcome) is None
    assert replies.pending == 0


def test_a_server_without_an_id_answers_none_but_garbage_is_a_bad_reply() -> None:
    replies = ReplyBuffer()
    replies.feed(b"200 OK 7\r\n400 Unknown Command\r\n")
    assert replies.take(parse_server_id) == 7
    assert replies.take(parse_server_id) is None
    assert replies.pending == 0
    replies.feed(b"hello\r\n")
    with pytest.raises(BadReply):
        replies.take(parse_server_id)
