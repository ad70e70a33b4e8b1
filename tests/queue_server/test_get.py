"""GET beyond the case files (cases/get/): uniform choice over queues, COUNT batches and their locks."""
from __future__ import annotations

import re
from collections import Counter

from util import get_job, put_ok, read_batch, running_ids

ROUNDS = 400


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

