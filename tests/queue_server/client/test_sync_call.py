"""Synchronous calls: the reply queue by convention, replies acknowledged by the library,
late replies deleted instead of left in the reply queue (real queue server)."""
from __future__ import annotations

import asyncio
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from polling import DEADLINE_S

from queue_server.client import QueueClient
from queue_server.client.aio import AsyncQueueClient
from queue_server.client.calls import AbandonedWaits, call_request, reply_queue
from queue_server.protocol.client_errors import ReplyTimeout
from queue_server.protocol.replies import Job
from slot.handler import Handler
from slot.reply_key import Reply
from slot.source import ClientSource
from slot.wake import Waker
from tests.queue_server.server_proc import ServerProc
from tests.queue_server.util import poll_until

RESULT_DEADLINE_S = DEADLINE_S  # tests/polling.py: sized for a busy shared machine


@pytest.fixture
def server(reused_queue_server) -> ServerProc:  # type: ignore[no-untyped-def]
    return reused_queue_server("--fsync", "never")  # type: ignore[no-any-return]


def serve_one(server: ServerProc, queue: str) -> Job:
    """A handler's side by hand: take a job, reply to `<queue>_reply` under its item, DONE it."""
    with QueueClient(server.address) as handler:
        [task] = handler.get(queue, block=True)
        assert task.item is not None
        handler.put(reply_queue(queue), task.data.upper(), item=task.item)
        handler.done(task.id)
        return task


def nothing_left(client: QueueClient, *queues: str) -> bool:
    return all(client.total(q).jobs == 0 and client.total(q).running == 0 for q in queues)


def test_call_waits_on_the_handlers_reply_queue_and_leaves_no_job_behind(server: ServerProc) -> None:
    with ThreadPoolExecutor(1) as pool, QueueClient(server.address, timeout_s=5.0) as client:
        for n in range(3):
            task = pool.submit(serve_one, server, "emails")
            reply = client.call("emails", b"hello %d" % n, timeout_s=RESULT_DEADLINE_S)
            assert (reply.queue, reply.data) == ("emails_reply", b"HELLO %d" % n)
            assert reply.item == task.result(RESULT_DEADLINE_S).item
        # Handed out with EXPIRE 0 THEN DONE: the server deletes each reply itself.
        poll_until(lambda: nothing_left(client, "emails", "emails_reply"), RESULT_DEADLINE_S,
                   what="no job left running or waiting after three calls")
        assert client.runlist() == []


def test_a_reply_that_comes_after_the_caller_gave_up_is_deleted_not_left_in_the_queue(
    server: ServerProc,
) -> None:
    with QueueClient(server.address, timeout_s=5.0) as client:
        with pytest.raises(ReplyTimeout, match=r"within 0\.2 s"):
            client.call("emails", b"late", timeout_s=0.2)
        client.ping()  # the client goes on, on a fresh connection
        serve_one(server, "emails")
        poll_until(lambda: nothing_left(client, "emails", "emails_reply"), RESULT_DEADLINE_S,
                   what="the late reply deleted")
        # The given-up connection got the reply; the client closes it before its next call.
        assert len(client._abandoned) == 1
        client._close_answered_waits()
        assert len(client._abandoned) == 0


def test_an_explicit_output_queue_and_lock_keep_the_reply_running_for_the_caller(server: ServerProc) -> None:
    with ThreadPoolExecutor(1) as pool, QueueClient(server.address, timeout_s=5.0) as client:
        def serve_to_replies() -> None:
            with QueueClient(server.address) as handler:
                [task] = handler.get("requests", block=True)
                handler.put("replies", b"ok", item=task.item)
                handler.done(task.id)

        served = pool.submit(serve_to_replies)
        reply = client.call("requests", b"x", output_queue="replies", expire_s=30, then="done",
                            timeout_s=RESULT_DEADLINE_S)
        served.result(RESULT_DEADLINE_S)  # the request's own job is DONE by now
        assert [job.id for job in client.runlist()] == [reply.id]
        assert client.done(reply.id)[0].found


def test_the_async_call_uses_the_same_reply_queue_and_deletes_late_replies(server: ServerProc) -> None:
    async def scenario() -> bytes:
        async with AsyncQueueClient(server.address) as caller:
            with pytest.raises(ReplyTimeout):
                await caller.call("thumbs", b"late", timeout_s=0.2, late_reply_s=30)
            await asyncio.to_thread(serve_one, server, "thumbs")
            serving = asyncio.create_task(asyncio.to_thread(serve_one, server, "thumbs"))
            reply = await caller.call("thumbs", b"now", timeout_s=RESULT_DEADLINE_S)
            await serving
            return reply.data

    assert asyncio.run(scenario()) == b"NOW"
    with QueueClient(server.address) as client:
        poll_until(lambda: nothing_left(client, "thumbs", "thumbs_reply"), RESULT_DEADLINE_S,
                   what="both replies deleted")


def test_the_call_request_names_the_reply_queue_and_acknowledges_by_expiry() -> None:
    assert call_request("emails", b"hi", output_queue=None, priority=0, expire_s=None, then=None) == (
        b"PUT emails 0 2 NEW WAIT emails_reply EXPIRE 0 THEN DONE KEY *\r\nhi"
    )
    assert call_request("emails", b"hi", output_queue="out", priority=5, expire_s=30, then=None) == (
        b"PUT emails 5 2 NEW WAIT out EXPIRE 30 KEY *\r\nhi"
    )


def test_given_up_waits_are_bounded_in_number_and_time() -> None:
    waits: AbandonedWaits[str] = AbandonedWaits(limit=2)
    assert waits.add("a", until=10.0) == []
    assert waits.add("b", until=20.0) == []
    assert waits.add("c", until=30.0) == ["a"]
    assert waits.due(15.0) == []
    assert waits.due(25.0) == ["b"]
    assert waits.due(0.0, answered={id("c")}) == ["c"]
    assert len(waits) == 0


def test_a_reply_to_a_caller_that_gave_up_and_exited_is_deleted_after_its_ttl(
    server: ServerProc,
) -> None:
    """Issue 12: the caller's process is gone (nobody holds its wait open), so only the
    reply's TTL (the slot's reply path: ClientSource.reply with the handler's reply_ttl_s)
    keeps the reply queue from keeping it for good."""
    caller = subprocess.run(
        [sys.executable, "-c",
         "from queue_server.client import QueueClient\n"
         "from queue_server.protocol.client_errors import ReplyTimeout\n"
         f"client = QueueClient({server.address!r})\n"
         "try:\n"
         "    client.call('emails', b'gone', timeout_s=0.2)\n"
         "except ReplyTimeout:\n"
         "    print('gave up')\n"],
        capture_output=True, timeout=RESULT_DEADLINE_S * 3, cwd=Path(__file__).resolve().parents[3],
    )
    assert caller.stdout.strip() == b"gave up", caller.stderr
    with QueueClient(server.address, timeout_s=5.0) as client:
        [task] = client.get("emails", block=True)
        assert task.item is not None
        # 2 s: the TOTAL below must come before the TTL on a busy shared machine.
        ClientSource(client, Waker()).reply(reply_queue("emails"), [Reply(task.id, task.item, b"GONE")], ttl_s=2.0)
        client.done(task.id)
        assert client.total("emails_reply").jobs == 1  # nobody took it: it waits, for now
        poll_until(lambda: nothing_left(client, "emails", "emails_reply"), RESULT_DEADLINE_S,
                   what="the reply deleted by its TTL")
        assert client.stats("emails_reply")["emails_reply"].ttl_expired == 1
    assert Handler.reply_ttl_s == 600.0  # what a slot's replies get unless a handler says
