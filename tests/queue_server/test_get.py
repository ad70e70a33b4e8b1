"""GET: empty replies, priority order, FIFO, uniform choice over queues, queue lists, COUNT batches."""
from __future__ import annotations

import re
from collections import Counter

from util import get, get_job, put_ok, read_batch, read_job, running_ids, total

ROUNDS = 400


def test_get_on_an_empty_server_replies_404_queue_empty(queue_server):
    client = queue_server.connect()
    client.send(b"GET\r\nGET q\r\nGET a|b\r\n")
    client.expect(b"404 Queue Empty\r\n" * 3)


def test_get_reply_names_queue_id_priority_and_length_then_the_data(queue_server):
    client = queue_server.connect()
    put_ok(client, "jobs", -3, b"payload")
    client.send(b"GET jobs\r\n")
    line = client.line()
    match = re.fullmatch(rb"200 OK jobs ([0-9]+) -3 7", line)
    assert match, line
    assert int(match[1]) > 0
    client.expect(b"payload")


def test_highest_priority_is_served_first(queue_server):
    client = queue_server.connect()
    for priority in (1, 5, 3, -2, 5):
        put_ok(client, "q", priority, b"p%d" % priority)
    order = [get_job(client, "GET q").priority for _ in range(5)]
    assert order == [5, 5, 3, 1, -2]


def test_fifo_within_a_priority_while_other_priorities_interleave(queue_server):
    client = queue_server.connect()
    for n in range(6):
        put_ok(client, "q", n % 2, b"%d" % n)
    assert [get_job(client, "GET q").data for _ in range(6)] == [b"1", b"3", b"5", b"0", b"2", b"4"]


def test_get_makes_the_job_running_under_its_new_id(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x")
    job = get_job(client, "GET q")
    assert total(client, "q") == (1, 0, 0, 1)
    assert running_ids(client) == {job.id}
    assert get(client, "GET q") is None


def test_every_hand_out_gets_a_new_id(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x")
    seen = []
    for _ in range(5):
        job = get_job(client, "GET q")
        seen.append(job.id)
        client.send(b"LATER %d\r\n" % job.id)
        client.expect(b"200 OK\r\n")
    assert len(set(seen)) == 5
    assert all(job_id > 0 for job_id in seen)


def test_get_of_an_unknown_queue_is_empty_even_when_others_hold_jobs(queue_server):
    client = queue_server.connect()
    put_ok(client, "full", 0, b"x")
    assert get(client, "GET other") is None
    assert total(client, "full") == (1, 1, 1, 0)


def _pick_counts(client, request: str) -> Counter[str]:
    """GET then LATER the job, ROUNDS times, so the queues keep their sizes; count the queues picked."""
    picks: Counter[str] = Counter()
    for _ in range(ROUNDS):
        job = get_job(client, request)
        picks[job.queue] += 1
        client.send(b"LATER %d\r\n" % job.id)
        client.expect(b"200 OK\r\n")
    return picks


def test_get_without_a_queue_chooses_uniformly_among_queues_not_jobs(queue_server):
    client = queue_server.connect()
    for n in range(9):
        put_ok(client, "big", 0, b"big%d" % n)
    put_ok(client, "small", 0, b"small")
    picks = _pick_counts(client, "GET")
    # Uniform over queues: small ~ 50% (sd 2.5%); uniform over jobs would give ~10%.
    assert 0.35 * ROUNDS <= picks["small"] <= 0.65 * ROUNDS, picks


def test_get_with_a_list_chooses_uniformly_among_the_listed_non_empty_queues(queue_server):
    client = queue_server.connect()
    for n in range(9):
        put_ok(client, "a", 0, b"a%d" % n)
    put_ok(client, "b", 0, b"b")
    put_ok(client, "c", 100, b"c is not listed")
    picks = _pick_counts(client, "GET a|b|empty")
    assert set(picks) == {"a", "b"}, picks
    assert 0.35 * ROUNDS <= picks["b"] <= 0.65 * ROUNDS, picks


def test_get_with_a_list_takes_from_the_only_non_empty_listed_queue(queue_server):
    client = queue_server.connect()
    put_ok(client, "b", 0, b"one")
    put_ok(client, "b", 0, b"two")
    put_ok(client, "c", 0, b"unlisted")
    assert get_job(client, "GET a|b").data == b"one"
    assert get_job(client, "GET b|a").data == b"two"
    assert get(client, "GET a|b") is None


def test_get_without_a_queue_skips_queues_whose_jobs_are_all_running(queue_server):
    client = queue_server.connect()
    put_ok(client, "busy", 0, b"taken")
    put_ok(client, "ready", 0, b"r1")
    put_ok(client, "ready", 0, b"r2")
    get_job(client, "GET busy")
    assert [get_job(client, "GET").queue for _ in range(2)] == ["ready", "ready"]
    assert get(client, "GET") is None


def test_get_count_returns_a_batch_in_priority_and_fifo_order(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 1, b"low")
    put_ok(client, "q", 5, b"hi1", "IS it")
    put_ok(client, "q", 5, b"hi2")
    client.send(b"GET q COUNT 2\r\n")
    jobs = read_batch(client)
    assert [(j.queue, j.priority, j.data, j.item) for j in jobs] == [
        ("q", 5, b"hi1", "it"), ("q", 5, b"hi2", None),
    ]
    assert len({j.id for j in jobs}) == 2
    assert running_ids(client) == {j.id for j in jobs}


def test_get_count_larger_than_ready_returns_what_is_ready(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"only")
    client.send(b"GET q COUNT 10\r\n")
    client.expect(b"200 OK 1 JOBS\r\n")
    line = client.line()
    assert re.fullmatch(rb"q [0-9]+ 0 4", line), line
    client.expect(b"only")


def test_get_count_with_nothing_ready_replies_404(queue_server):
    client = queue_server.connect()
    client.send(b"GET q COUNT 3\r\n")
    client.expect(b"404 Queue Empty\r\n")


def test_get_count_with_expire_before_or_after_gives_every_job_of_the_batch_an_expiry(queue_server):
    client = queue_server.connect()
    for queue in ("q", "r"):
        put_ok(client, queue, 0, b"a")
        put_ok(client, queue, 0, b"b")
    # DESIGN.md writes `GET q COUNT n EXPIRE lock`; PROTOCOL.md appends COUNT to a GET.
    for request in (b"GET q COUNT 5 EXPIRE 1000\r\n", b"GET r EXPIRE 1000 COUNT 5\r\n"):
        client.send(request)
        assert len(read_batch(client)) == 2, request
    client.send(b"RUNLIST\r\n")
    client.expect(b"200 OK 4\r\n")
    for _ in range(4):
        line = client.line()
        assert re.fullmatch(rb"[0-9]+ [qr] 0 EXPIRE [0-9]+(\.[0-9]+)?", line), line


def test_item_is_reported_on_every_hand_out(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x", "IS the_item")
    client.send(b"GET q\r\n")
    job = read_job(client)
    assert job is not None and job.item == "the_item"
    client.send(b"LATER %d\r\nGET q\r\n" % job.id)
    client.expect(b"200 OK\r\n")
    again = read_job(client)
    assert again is not None and again.item == "the_item" and again.id != job.id
