"""Offline mode: which commands get 500, which still answer, and what happens to blocked clients."""
from __future__ import annotations

import json
import re

from util import barrier, get_job, put_ok, runlist, total


def _offline(client) -> None:
    client.send(b"OFFLINE\r\n")
    client.expect(b"200 OK Switched to Offline Mode\r\n")


def test_offline_and_online_reply_with_their_status_lines(queue_server):
    client = queue_server.connect()
    client.send(b"OFFLINE\r\nONLINE\r\n")
    client.expect(b"200 OK Switched to Offline Mode\r\n200 OK Switched to Online Mode\r\n")


def test_queue_commands_get_500_offline_mode(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x")
    job = get_job(client, "GET q")
    _offline(client)
    for request in (b"GET", b"GET q", b"GETB q", b"GETBE q", b"GET q COUNT 2",
                    b"DONE %d" % job.id, b"LATER %d" % job.id):
        client.send(request + b"\r\n")
        client.expect(b"500 Offline Mode\r\n")
    assert total(client, "q") == (1, 0, 0, 1)


def test_put_offline_gets_500_and_still_consumes_its_data(queue_server):
    client = queue_server.connect()
    _offline(client)
    client.send(b"PUT q 0 4\r\nPINGPING\r\n")
    client.expect(b"500 Offline Mode\r\n200 PONG\r\n")
    assert total(client) == (0, 0, 0, 0)


def test_put_new_offline_gets_a_plain_500_offline_mode(queue_server):
    client = queue_server.connect()
    _offline(client)
    client.send(b"PUT q 0 1 NEW\r\nx")
    client.expect(b"500 Offline Mode\r\n")
    client.send(b"PUT q 0 1 NEW WAIT out\r\nx")
    client.expect(b"500 Offline Mode\r\n")
    assert total(client) == (0, 0, 0, 0)


def test_statistics_snapshot_and_ping_still_answer_offline(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x")
    _offline(client)
    assert total(client) == (1, 1, 1, 0)
    assert total(client, "q") == (1, 1, 1, 0)
    client.send(b"STATS\r\n")
    head = client.line()
    match = re.fullmatch(rb"200 OK ([0-9]+)", head)
    assert match, head
    assert "q" in json.loads(client.exact(int(match[1])))
    assert runlist(client) == []
    assert runlist(client, data=True) == []
    client.send(b"SNAPSHOT\r\n")
    head = client.line()
    match = re.fullmatch(rb"200 OK ([0-9]+)", head)
    assert match, head
    client.exact(int(match[1]))
    barrier(client)


def test_online_restores_normal_service_with_the_state_kept(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"kept")
    _offline(client)
    client.send(b"ONLINE\r\n")
    client.expect(b"200 OK Switched to Online Mode\r\n")
    assert get_job(client, "GET q").data == b"kept"


def test_blocked_getb_client_gets_500_when_the_server_goes_offline(queue_server):
    waiter, admin = queue_server.connect(), queue_server.connect()
    waiter.send(b"GETB q\r\n")
    barrier(admin)
    assert waiter.pending() == b""
    _offline(admin)
    waiter.expect(b"500 Offline Mode\r\n")


def test_blocked_getbe_client_gets_500_when_the_server_goes_offline(queue_server):
    waiter, admin = queue_server.connect(), queue_server.connect()
    put_ok(admin, "q", 0, b"x")
    get_job(admin, "GET q")
    waiter.send(b"GETBE q\r\n")
    barrier(admin)
    assert waiter.pending() == b""
    _offline(admin)
    waiter.expect(b"500 Offline Mode\r\n")


def test_put_wait_client_gets_500_when_the_server_goes_offline(queue_server):
    waiter, admin = queue_server.connect(), queue_server.connect()
    waiter.send(b"PUT in 0 1 IS it WAIT out\r\nx")
    waiter.expect(b"206 Wait for output\r\n")
    _offline(admin)
    waiter.expect(b"500 Offline Mode\r\n")


def test_former_getb_client_is_not_served_after_going_back_online(queue_server):
    waiter, admin = queue_server.connect(), queue_server.connect()
    waiter.send(b"GETB q\r\n")
    barrier(admin)
    _offline(admin)
    waiter.expect(b"500 Offline Mode\r\n")
    admin.send(b"ONLINE\r\n")
    admin.expect(b"200 OK Switched to Online Mode\r\n")
    put_ok(admin, "q", 0, b"x")
    assert total(admin, "q") == (1, 1, 1, 0)
    assert waiter.pending() == b""


def test_sync_commands_are_accepted_offline(queue_server):
    client = queue_server.connect()
    _offline(client)
    client.send(b"SYNC PUT q 3 1 IS it\r\nx")
    client.expect(b"200 OK\r\n")
    client.send(b"SYNC GET q 77 3\r\n")
    client.expect(b"200 OK\r\n")
    (entry, _), = runlist(client)
    assert (entry.id, entry.queue, entry.priority) == (77, "q", 3)
    client.send(b"SYNC LATER 77\r\n")
    client.expect(b"200 OK\r\n")
    client.send(b"SYNC GET q 78 3\r\n")
    client.expect(b"200 OK\r\n")
    client.send(b"SYNC DONE 78\r\n")
    client.expect(b"200 OK FINQ FINI\r\n")
    assert total(client) == (0, 0, 0, 0)


def test_sync_get_last_takes_the_last_ready_job_of_the_priority(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 1, b"first")
    put_ok(client, "q", 1, b"last")
    client.send(b"SYNC GET LAST q 500 1\r\n")
    client.expect(b"200 OK\r\n")
    client.send(b"RUNLIST DATA\r\n")
    client.expect(b"200 OK 1\r\n500 q 1 4\r\nlast")


def test_request_pipelined_behind_a_blocked_getb_is_answered_after_its_500(queue_server):
    waiter, admin = queue_server.connect(), queue_server.connect()
    waiter.send(b"GETB q\r\nPING\r\n")
    barrier(admin)
    _offline(admin)
    waiter.expect(b"500 Offline Mode\r\n200 PONG\r\n")
