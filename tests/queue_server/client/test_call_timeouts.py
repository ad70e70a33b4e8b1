"""A call that times out says why (issue 15): whether anything serves the queue, and whether
the job was taken and finished without a reply, failed, or still runs (real queue server).
A call to a frozen server (SIGSTOP) raises within seconds, not after the client's 30 s."""
from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

from queue_server.client import QueueClient
from queue_server.client.aio import AsyncQueueClient
from queue_server.protocol.client_errors import ReplyTimeout
from tests.queue_server.server.ha import frozen
from tests.queue_server.server_proc import ServerProc, running_queue_server
from tests.queue_server.util import poll_until

# The call gives up after this; long enough for the taker below to act on a busy machine.
GIVE_UP_S = 1.0
DEADLINE_S = 10.0
# A call(timeout_s=GIVE_UP_S) to a frozen server: its acknowledgement waited 5 s
# (calls.ack_timeout_s); with room for a loaded machine, well under the client's 30 s.
FROZEN_RAISES_WITHIN_S = 15.0


@pytest.fixture
def server(reused_queue_server) -> ServerProc:  # type: ignore[no-untyped-def]
    return reused_queue_server("--fsync", "never")  # type: ignore[no-any-return]


def _timeout_text(server: ServerProc, queue: str, *, give_up_s: float = GIVE_UP_S) -> str:
    with QueueClient(server.address, timeout_s=DEADLINE_S) as client, \
            pytest.raises(ReplyTimeout) as caught:
        client.call(queue, b"job", timeout_s=give_up_s)
    return str(caught.value)


def test_a_call_into_a_queue_nothing_serves_says_so(server: ServerProc) -> None:
    text = _timeout_text(server, "emials")
    assert re.fullmatch(
        r"no reply to PUT \.\.\. WAIT from 127\.0\.0\.1:\d+ within 1\.0 s: nothing took the job: no "
        r"slot serves queue 'emials' \(none of its jobs runs\); check the "
        r"queue's name, and that a master runs its handler; a reply within 60 s more is deleted", text), text


def test_a_call_into_a_queue_no_config_names_says_that_too(tmp_path: Path) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text("[queues.emails]\n")
    with running_queue_server(tmp_path, "--fsync", "never", "--config", str(config)) as configured:
        assert "(none of its jobs runs and no config names it)" in _timeout_text(configured, "emials")


def _taker(server: ServerProc, queue: str, then: str) -> None:
    """A handler by hand that takes the call's job and does `then` with it, without a reply."""
    with QueueClient(server.address) as handler:
        [job] = poll_until(lambda: handler.get(queue, keys=True), DEADLINE_S, what="the call's job")
        if then == "done":
            handler.done(job.id)
        elif then == "fail":
            handler.fail(job.id, "Traceback (most recent call last):\nValueError: no such user", delay_s=600)


@pytest.mark.parametrize(("then", "expected"), [
    ("done", "the job was taken and finished (or deleted) without a reply to 'emails_reply': "
             "does its handler call job.reply()?"),
    ("fail", "its handler failed (attempt 1: ValueError: no such user); it runs again at "),
    ("hold", "a slot is running the job (attempt 1): its handler takes longer than 3.0 s"),
])
def test_a_call_whose_job_was_taken_says_what_became_of_it(server: ServerProc, then: str, expected: str) -> None:
    import threading

    taker = threading.Thread(target=_taker, args=(server, "emails", then))
    taker.start()
    try:
        text = _timeout_text(server, "emails", give_up_s=3.0)
    finally:
        taker.join(DEADLINE_S)
    assert expected in text, text


def test_the_async_client_says_why_too(server: ServerProc) -> None:
    async def call() -> str:
        async with AsyncQueueClient(server.address, timeout_s=DEADLINE_S) as client:
            with pytest.raises(ReplyTimeout) as caught:
                await client.call("nobody", b"x", timeout_s=GIVE_UP_S)
            return str(caught.value)

    assert "nothing took the job: no slot serves queue 'nobody'" in asyncio.run(call())


def test_a_call_to_a_frozen_server_raises_within_seconds(tmp_path: Path) -> None:
    with running_queue_server(tmp_path, "--fsync", "never") as server, \
            QueueClient(server.address) as client:
        client.ping()
        with frozen(server), pytest.raises(ReplyTimeout) as caught:
            started = time.monotonic()
            try:
                client.call("q", b"job", timeout_s=GIVE_UP_S)
            finally:
                raised_after_s = time.monotonic() - started
        assert "PUT ... WAIT" in str(caught.value), caught.value
        assert raised_after_s < FROZEN_RAISES_WITHIN_S, f"raised after {raised_after_s:.1f} s"
