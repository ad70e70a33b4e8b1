"""TOTAL, STATS and RUNLIST: counts, fine point 3, the STATS JSON keys, RUNLIST DATA layout."""
from __future__ import annotations

import json
import re

import pytest
from util import assert_bad_request, get_job, poll_until, put_ok, runlist, stats

STATS_INT_KEYS = ("ready", "delayed", "running", "put", "done", "later", "expired")


def test_total_of_an_empty_server_is_all_zero(queue_server):
    client = queue_server.connect()
    client.send(b"TOTAL\r\nTOTAL q\r\n")
    client.expect(b"200 OK 0 0 0 0\r\n200 OK 0 0 0 0\r\n")


def test_total_counts_queues_priority_classes_waiting_and_running_jobs(queue_server):
    client = queue_server.connect()
    put_ok(client, "one", 0, b"a")
    put_ok(client, "one", 0, b"b")
    put_ok(client, "one", 5, b"c")
    put_ok(client, "two", 0, b"d")
    client.send(b"TOTAL\r\n")
    client.expect(b"200 OK 2 3 4 0\r\n")
    assert get_job(client, "GET one").data == b"c"
    client.send(b"TOTAL\r\nTOTAL one\r\nTOTAL two\r\nTOTAL three\r\n")
    client.expect(b"200 OK 2 2 3 1\r\n200 OK 1 1 2 1\r\n200 OK 1 1 1 0\r\n200 OK 0 0 0 0\r\n")


def test_total_counts_a_queue_whose_only_job_is_running(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x")
    get_job(client, "GET q")
    client.send(b"TOTAL q\r\nTOTAL\r\n")
    client.expect(b"200 OK 1 0 0 1\r\n200 OK 1 0 0 1\r\n")


def test_total_counts_a_priority_class_holding_only_delayed_jobs(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x", "DELAY 1000")
    put_ok(client, "q", 3, b"y", "DELAY 1000")
    client.send(b"TOTAL q\r\nTOTAL\r\n")
    client.expect(b"200 OK 1 2 2 0\r\n200 OK 1 2 2 0\r\n")


def test_total_forgets_a_queue_once_its_last_job_is_done(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x")
    job = get_job(client, "GET q")
    client.send(b"DONE %d\r\nTOTAL\r\nTOTAL q\r\n" % job.id)
    client.expect(b"200 OK FINQ\r\n200 OK 0 0 0 0\r\n200 OK 0 0 0 0\r\n")


def test_total_with_a_bad_queue_name_is_a_bad_request(queue_server):
    client = queue_server.connect()
    assert_bad_request(client.request(b"TOTAL no-such!name"))


@pytest.mark.fresh_server
def test_stats_reports_every_documented_key_per_queue(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    put_ok(client, "q", 0, b"b")
    put_ok(client, "q", 5, b"c")
    done = get_job(client, "GET q")
    client.send(b"DONE %d\r\n" % done.id)
    client.expect(b"200 OK\r\n")
    later = get_job(client, "GET q")
    client.send(b"LATER %d\r\n" % later.id)
    client.expect(b"200 OK\r\n")
    get_job(client, "GET q")  # b stays running, a is ready
    put_ok(client, "q", 7, b"d", "DELAY 1000")
    put_ok(client, "r", 1, b"e")
    report = stats(client)
    assert set(report) == {"q", "r"}, report
    q = report["q"]
    for key in STATS_INT_KEYS:
        assert isinstance(q[key], int) and not isinstance(q[key], bool), (key, q)
    assert {key: q[key] for key in STATS_INT_KEYS} == {
        "ready": 1, "delayed": 1, "running": 1, "put": 4, "done": 1, "later": 1, "expired": 0,
    }
    assert {int(priority): count for priority, count in q["by_priority"].items()} == {0: 1, 7: 1}
    assert isinstance(q["oldest_ready_age_s"], (int, float)) and q["oldest_ready_age_s"] >= 0
    assert report["r"]["ready"] == 1 and report["r"]["put"] == 1


def test_oldest_ready_age_grows_while_the_job_waits(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"old")
    put_ok(client, "q", 0, b"young")
    poll_until(lambda: stats(client, "q")["q"]["oldest_ready_age_s"] >= 0.3, 5.0,
               what="oldest_ready_age_s >= 0.3")
    assert stats(client, "q")["q"]["oldest_ready_age_s"] < 60


def test_stats_for_one_queue_holds_only_that_queue(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    put_ok(client, "r", 0, b"b")
    report = stats(client, "q")
    assert set(report) == {"q"}
    assert report["q"]["ready"] == 1


def test_stats_length_is_the_exact_byte_length_of_the_json(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    client.send(b"STATS\r\nPING\r\n")
    head = client.line()
    match = re.fullmatch(rb"200 OK ([0-9]+)", head)
    assert match, head
    body = client.exact(int(match[1]))
    json.loads(body)
    client.expect(b"200 PONG\r\n")


def test_runlist_with_nothing_running_is_200_ok_0(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    client.send(b"RUNLIST\r\nRUNLIST DATA\r\n")
    client.expect(b"200 OK 0\r\n200 OK 0\r\n")


def test_runlist_lists_id_queue_and_priority_of_each_running_job(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", -4, b"a")
    put_ok(client, "r", 9, b"bb")
    a, b = get_job(client, "GET q"), get_job(client, "GET r")
    client.send(b"RUNLIST\r\n")
    client.expect(b"200 OK 2\r\n")
    lines = {client.line(), client.line()}
    assert lines == {b"%d q -4" % a.id, b"%d r 9" % b.id}


def test_runlist_data_lists_lengths_then_the_data_blocks_in_the_same_order(queue_server):
    client = queue_server.connect()
    payloads = [b"first", b"", b"third\r\nwith lines", bytes(range(256))]
    for n, payload in enumerate(payloads):
        put_ok(client, f"q{n}", n, payload)
    jobs = {get_job(client, f"GET q{n}").id: payloads[n] for n in range(len(payloads))}
    entries = runlist(client, data=True)
    assert {entry.id for entry, _ in entries} == set(jobs)
    for entry, block in entries:
        assert block == jobs[entry.id]
        assert entry.length == len(jobs[entry.id])
        assert entry.queue == f"q{entry.priority}"
    client.send(b"PING\r\n")
    client.expect(b"200 PONG\r\n")


def test_runlist_data_line_puts_the_length_before_expire(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 2, b"abc")
    job = get_job(client, "GET q EXPIRE 50")
    client.send(b"RUNLIST DATA\r\n")
    client.expect(b"200 OK 1\r\n")
    line = client.line()
    assert re.fullmatch(rb"%d q 2 3 EXPIRE [0-9]+(\.[0-9]+)?" % job.id, line), line
    client.expect(b"abc")


def test_runlist_with_an_unknown_argument_is_a_bad_request(queue_server):
    client = queue_server.connect()
    assert_bad_request(client.request(b"RUNLIST NODATA"))
