"""DONE and LATER: FINQ/FINI rules, unknown ids, LATER to the end, several ids in one request."""
from __future__ import annotations

from util import assert_bad_request, drain, get_job, put_ok, running_ids, total


def test_done_of_a_job_whose_queue_still_holds_jobs_replies_plain_200_ok(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    put_ok(client, "q", 0, b"b")
    job = get_job(client, "GET q")
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK\r\n")
    assert total(client, "q") == (1, 1, 1, 0)


def test_done_of_the_last_job_of_a_queue_replies_finq(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    job = get_job(client, "GET q")
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK FINQ\r\n")
    assert total(client) == (0, 0, 0, 0)


def test_finq_waits_for_the_other_running_job_of_the_queue(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a")
    put_ok(client, "q", 0, b"b")
    first, second = get_job(client, "GET q"), get_job(client, "GET q")
    client.send(b"DONE %d\r\n" % first.id)
    client.expect(b"200 OK\r\n")
    client.send(b"DONE %d\r\n" % second.id)
    client.expect(b"200 OK FINQ\r\n")


def test_finq_waits_for_a_delayed_job_of_the_queue(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"later", "DELAY 1000")
    put_ok(client, "q", 0, b"now")
    job = get_job(client, "GET q")
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK\r\n")


def test_done_of_the_last_job_of_an_item_replies_fini(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"mine", "IS it")
    put_ok(client, "q", 0, b"other")
    job = get_job(client, "GET q")
    assert job.item == "it"
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK FINI\r\n")


def test_done_of_the_last_job_of_both_queue_and_item_replies_finq_fini(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x", "IS it")
    job = get_job(client, "GET q")
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK FINQ FINI\r\n")


def test_item_spanning_two_queues_is_finished_only_by_its_last_job(queue_server):
    client = queue_server.connect()
    put_ok(client, "first", 0, b"1", "IS it")
    put_ok(client, "second", 0, b"2", "IS it")
    one = get_job(client, "GET first")
    client.send(b"DONE %d\r\n" % one.id)
    client.expect(b"200 OK FINQ\r\n")
    two = get_job(client, "GET second")
    client.send(b"DONE %d\r\n" % two.id)
    client.expect(b"200 OK FINQ FINI\r\n")


def test_fini_waits_for_a_running_job_of_the_item_in_another_queue(queue_server):
    client = queue_server.connect()
    put_ok(client, "first", 0, b"1", "IS it")
    put_ok(client, "second", 0, b"2", "IS it")
    one, two = get_job(client, "GET first"), get_job(client, "GET second")
    client.send(b"DONE %d\r\n" % two.id)
    client.expect(b"200 OK FINQ\r\n")
    client.send(b"DONE %d\r\n" % one.id)
    client.expect(b"200 OK FINQ FINI\r\n")


def test_fini_waits_for_a_delayed_job_of_the_item(queue_server):
    client = queue_server.connect()
    put_ok(client, "first", 0, b"1", "IS it")
    put_ok(client, "second", 0, b"2", "DELAY 1000 IS it")
    job = get_job(client, "GET first")
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK FINQ\r\n")


def test_job_without_an_item_never_reports_fini(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x")
    put_ok(client, "q", 0, b"y", "IS other")
    job = get_job(client, "GET q")
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK\r\n")


def test_done_of_an_id_that_is_not_running_replies_404_job_not_found(queue_server):
    client = queue_server.connect()
    client.send(b"DONE 12345\r\n")
    client.expect(b"404 Job Not Found\r\n")


def test_second_done_of_the_same_id_replies_404(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x")
    job = get_job(client, "GET q")
    client.send(b"DONE %d\r\nDONE %d\r\n" % (job.id, job.id))
    client.expect(b"200 OK FINQ\r\n404 Job Not Found\r\n")


def test_done_with_an_id_that_is_not_a_number_is_a_bad_request(queue_server):
    client = queue_server.connect()
    for request in (b"DONE", b"DONE abc", b"LATER", b"LATER x1"):
        assert_bad_request(client.request(request))


def test_later_puts_the_job_back_at_the_end_of_its_priority(queue_server):
    client = queue_server.connect()
    for name in (b"a", b"b", b"c"):
        put_ok(client, "q", 2, name)
    put_ok(client, "q", 1, b"low")
    job = get_job(client, "GET q")
    assert job.data == b"a"
    client.send(b"LATER %d\r\n" % job.id)
    client.expect(b"200 OK\r\n")
    assert [j.data for j in drain(client, "q")] == [b"b", b"c", b"a", b"low"]


def test_later_makes_the_job_ready_again_and_its_old_id_is_gone(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x", "IS it")
    job = get_job(client, "GET q")
    client.send(b"LATER %d\r\n" % job.id)
    client.expect(b"200 OK\r\n")
    assert total(client, "q") == (1, 1, 1, 0)
    assert running_ids(client) == set()
    client.send(b"DONE %d\r\nLATER %d\r\n" % (job.id, job.id))
    client.expect(b"404 Job Not Found\r\n404 Job Not Found\r\n")
    again = get_job(client, "GET q")
    assert (again.data, again.item) == (b"x", "it") and again.id != job.id


def test_later_of_an_unknown_id_replies_404(queue_server):
    client = queue_server.connect()
    client.send(b"LATER 999\r\n")
    client.expect(b"404 Job Not Found\r\n")


def test_done_with_several_ids_replies_one_line_per_id_in_order(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"a", "IS it")
    put_ok(client, "q", 0, b"b", "IS it")
    put_ok(client, "q", 0, b"c")
    a, b, c = (get_job(client, "GET q") for _ in range(3))
    client.send(b"DONE %d 99999 %d %d %d\r\n" % (c.id, a.id, a.id, b.id))
    client.expect(b"200 OK\r\n404 Job Not Found\r\n200 OK\r\n404 Job Not Found\r\n200 OK FINQ FINI\r\n")
    assert total(client) == (0, 0, 0, 0)


def test_later_with_several_ids_requeues_them_in_the_order_given(queue_server):
    client = queue_server.connect()
    for name in (b"1", b"2", b"3"):
        put_ok(client, "q", 0, name)
    one, two = get_job(client, "GET q"), get_job(client, "GET q")
    client.send(b"LATER %d %d 424242\r\n" % (two.id, one.id))
    client.expect(b"200 OK\r\n200 OK\r\n404 Job Not Found\r\n")
    assert [j.data for j in drain(client, "q")] == [b"3", b"2", b"1"]


def test_sync_done_replies_as_done_with_finq_and_fini(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x", "IS it")
    job = get_job(client, "GET q")
    client.send(b"SYNC DONE %d\r\n" % job.id)
    client.expect(b"200 OK FINQ FINI\r\n")
