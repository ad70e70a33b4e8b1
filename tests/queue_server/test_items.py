"""Items: IS <item>, NEW names (`_<digits>`, unique), item validation, items across hand-outs."""
from __future__ import annotations

import re

from polling import DEADLINE_S
from util import NEW_ITEM, assert_bad_request, get, get_job, poll_until, put, put_new, put_ok, total


def test_new_item_name_is_an_underscore_then_digits(queue_server):
    client = queue_server.connect()
    client.send(b"PUT q 0 1 NEW\r\nx")
    reply = client.line()
    match = re.fullmatch(rb"200 OK IS (_[0-9]+)", reply)
    assert match, reply


def test_new_item_names_are_unique(queue_server):
    client = queue_server.connect()
    names = [put_new(client, "q", 0, b"x") for _ in range(50)]
    assert len(set(names)) == 50


def test_new_item_name_is_the_item_of_the_job(queue_server):
    client = queue_server.connect()
    item = put_new(client, "q", 0, b"x")
    job = get_job(client, "GET q")
    assert job.item == item
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK FINQ FINI\r\n")


def test_new_never_returns_an_item_name_already_in_use(queue_server):
    client = queue_server.connect()
    first = put_new(client, "q", 0, b"x")
    number = int(first[1:])
    taken = {f"_{n}" for n in range(number + 1, number + 30)}
    for name in sorted(taken):
        put_ok(client, "q", 0, b"taken", f"IS {name}")
    fresh = [put_new(client, "q", 0, b"y") for _ in range(5)]
    assert not taken & set(fresh), f"NEW reused an item that holds jobs: {fresh}"
    assert first not in fresh


def test_client_may_name_an_item_like_a_new_one(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x", "IS _42")
    assert get_job(client, "GET q").item == "_42"


def test_item_name_of_128_characters_is_accepted(queue_server):
    client = queue_server.connect()
    item = "i" * 128
    put_ok(client, "q", 0, b"x", f"IS {item}")
    assert get_job(client, "GET q").item == item


def test_invalid_item_names_are_bad_requests_and_store_nothing(queue_server):
    client = queue_server.connect()
    for item in ("i" * 129, "bad-item", "caf\u00e9", "a.b"):
        assert_bad_request(put(client, "q", 0, b"x", f"IS {item}"))
    client.send(b"PUT q 0 1 IS\r\nxPING\r\n")
    assert_bad_request(client.line())
    client.expect(b"200 PONG\r\n")
    assert total(client) == (0, 0, 0, 0)


def test_item_survives_later_and_expiry(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x", "IS keep")
    job = get_job(client, "GET q")
    client.send(b"LATER %d\r\n" % job.id)
    client.expect(b"200 OK\r\n")
    assert get_job(client, "GET q EXPIRE 0").item == "keep"
    # DEADLINE_S, not 2 s: an EXPIRE 0 not honoured keeps the job for the 60 s default lock.
    again = poll_until(lambda: get(client, "GET q"), DEADLINE_S, what="expired job ready")
    assert again.item == "keep"


def test_new_item_name_matches_the_documented_pattern_for_every_reply(queue_server):
    client = queue_server.connect()
    for extra in ("NEW", "DELAY 100 NEW"):
        reply = put(client, "q", 0, b"x", extra)
        assert reply.startswith(b"200 OK IS "), reply
        assert NEW_ITEM.fullmatch(reply[10:]), reply
