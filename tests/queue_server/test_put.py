"""PUT: replies, priorities, FIFO, names, items and keyword order."""
from __future__ import annotations

import re

from util import assert_bad_request, drain, get, get_job, put, put_ok, total

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def test_put_replies_200_ok_and_the_job_is_waiting(queue_server):
    client = queue_server.connect()
    client.send(b"PUT q 0 5\r\nhello")
    client.expect(b"200 OK\r\n")
    assert total(client, "q") == (1, 1, 1, 0)


def test_put_with_is_replies_plain_200_ok_and_get_reports_the_item(queue_server):
    client = queue_server.connect()
    client.send(b"PUT q 0 5 IS item_1\r\nhello")
    client.expect(b"200 OK\r\n")
    job = get_job(client, "GET q")
    assert (job.item, job.data) == ("item_1", b"hello")


def test_put_with_new_replies_with_the_new_item_name(queue_server):
    client = queue_server.connect()
    client.send(b"PUT q 0 5 NEW\r\nhello")
    reply = client.line()
    assert re.fullmatch(rb"200 OK IS _[0-9]+", reply), reply
    assert get_job(client, "GET q").item == reply[len(b"200 OK IS "):].decode()


def test_jobs_of_one_priority_come_out_in_put_order(queue_server):
    client = queue_server.connect()
    for n in range(10):
        put_ok(client, "q", 4, b"job%d" % n)
    assert [job.data for job in drain(client, "q")] == [b"job%d" % n for n in range(10)]


def test_negative_priorities_are_valid_and_rank_below_zero(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", -5, b"minus five")
    put_ok(client, "q", 0, b"zero")
    put_ok(client, "q", -1, b"minus one")
    assert [(j.priority, j.data) for j in drain(client, "q")] == [
        (0, b"zero"), (-1, b"minus one"), (-5, b"minus five"),
    ]


def test_signed_64_bit_priority_bounds_are_accepted_and_ordered(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", INT64_MIN, b"lowest")
    put_ok(client, "q", INT64_MAX, b"highest")
    put_ok(client, "q", 0, b"middle")
    assert [j.priority for j in drain(client, "q")] == [INT64_MAX, 0, INT64_MIN]


def test_priority_outside_signed_64_bits_is_a_bad_request_that_still_consumes_the_data(queue_server):
    client = queue_server.connect()
    for priority in (INT64_MAX + 1, INT64_MIN - 1):
        client.send(b"PUT q %d 3\r\nabcPING\r\n" % priority)
        assert_bad_request(client.line())
        client.expect(b"200 PONG\r\n")
    assert total(client) == (0, 0, 0, 0)


def test_queue_name_of_128_characters_is_accepted(queue_server):
    client = queue_server.connect()
    name = "Az09_" * 25 + "xyz"
    assert len(name) == 128
    put_ok(client, name, 0, b"x")
    assert get_job(client, f"GET {name}").queue == name


def test_queue_name_of_129_characters_is_a_bad_request(queue_server):
    client = queue_server.connect()
    client.send(b"PUT " + b"a" * 129 + b" 0 1\r\nxPING\r\n")
    assert_bad_request(client.line())
    client.expect(b"200 PONG\r\n")
    assert total(client) == (0, 0, 0, 0)


def test_queues_are_independent(queue_server):
    client = queue_server.connect()
    put_ok(client, "a", 0, b"for a")
    put_ok(client, "b", 9, b"for b")
    assert get_job(client, "GET a").data == b"for a"
    assert get(client, "GET a") is None
    assert get_job(client, "GET b").data == b"for b"


def test_put_after_get_goes_to_the_end_of_its_priority(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 1, b"first")
    put_ok(client, "q", 1, b"second")
    assert get_job(client, "GET q").data == b"first"
    put_ok(client, "q", 1, b"third")
    assert [j.data for j in drain(client, "q")] == [b"second", b"third"]


def test_keywords_after_len_may_come_in_any_order(queue_server):
    client = queue_server.connect()
    for extra in ("DELAY 100 IS it_a", "IS it_b DELAY 100", "DELAY 100 NEW", "NEW DELAY 100"):
        reply = put(client, "q", 0, b"x", extra)
        if "NEW" in extra:
            assert re.fullmatch(rb"200 OK IS _[0-9]+", reply), (extra, reply)
        else:
            assert reply == b"200 OK", (extra, reply)
    assert total(client, "q") == (1, 1, 4, 0)
    assert get(client, "GET q") is None


def test_sync_put_stores_a_job_like_put(queue_server):
    client = queue_server.connect()
    client.send(b"SYNC PUT q 2 4 IS it\r\nsync")
    client.expect(b"200 OK\r\n")
    job = get_job(client, "GET q")
    assert (job.priority, job.data, job.item) == (2, b"sync", "it")


def test_sync_put_with_new_makes_an_item_like_put(queue_server):
    client = queue_server.connect()
    client.send(b"SYNC PUT q 0 1 NEW\r\nxPING\r\n")
    reply = client.line()
    assert re.fullmatch(rb"200 OK IS _[0-9]+", reply), f"SYNC PUT is 'as PUT': {reply!r}"
    client.expect(b"200 PONG\r\n")
