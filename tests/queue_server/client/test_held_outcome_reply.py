"""A request that follows the primary (`until`: a slot's reply PUT, DONE, LATER, FAIL, TOUCH)
whose reply a live primary holds for its replicas in sync mode, with two real queue servers
(a primary and its replica, frozen by SIGSTOP so that it confirms nothing) in the client's list.

The reply comes when the hold ends, and the request is sent once: a reply PUT (no key) is
one job. Before, the client gave the reply up after follow.py's fixed 5 s and sent the
request again: with `sync_timeout_s` 8 s and `sync_fallback = "async"` the primary then
acknowledged both PUTs (two jobs); with the default fallback (`refuse`) the hold lasts
until a replica confirms, so a replica silent for 8 s made two jobs with `sync_timeout_s`
1 s too.

A producer's keyed PUT (no `until`: it may go again, core.py) is checked the same way:
waited for, stored and acknowledged once the replica confirms. Sent again after a fixed
5 s instead, it met the refusing primary's `500 Offline Mode` and raised OfflineError,
its first PUT stored.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from queue_server.client import AsyncQueueClient, QueueClient
from tests.queue_server.server.ha import frozen, in_thread, role
from tests.queue_server.util import poll_until

FAST = ("--fsync", "never")
LOCK_S = 60.0  # the deadline the request follows the primary until (a slot's lock)
# What the servers hold a reply for: above follow.py's old fixed 5 s wait, and above
# the follow check's FOLLOW_CHECK_S + connect_timeout_s.
LONG_SYNC_TIMEOUT_S = 8.0
# With the default fallback (refuse), how long the replica stays silent: a reply is held
# for as long, whatever sync_timeout_s says.
SILENT_S = 9.0
NEVER_PROMOTED_S = "3600"


def _pair(start_queue_server: Any, *sync: str) -> tuple[Any, Any]:
    """A sync-mode primary and its linked replica, which never promotes itself (thawed, it
    takes a new snapshot and confirms again); the fixture kills both."""
    primary = start_queue_server(*FAST, "--replicate", "sync", "--server-id", "1", *sync)
    replica = start_queue_server(*FAST, "--replicate", "sync", "--server-id", "2",
                                 "--replica-of", primary.address, "--promote-after", NEVER_PROMOTED_S)
    conn = primary.connect()
    poll_until(lambda: role(conn)[1:3] == [b"sync", b"1"], what="the replica linked")
    return primary, replica


def _jobs_of(server: Any, queue: str) -> list[bytes]:
    with QueueClient(server.address, timeout_s=30.0) as reader:
        return [job.data for job in reader.get(queue, count=100)]


def _reply_put(client: QueueClient) -> str:
    """As slot/source.py puts a handler's reply: under the caller's item, following the
    primary until one lock time from now."""
    return client.put("q_reply", b"the answer", item="_7", ttl_s=600.0, until=time.monotonic() + LOCK_S)


def test_a_reply_held_past_the_old_5_s_wait_is_put_once(start_queue_server: Any) -> None:
    primary, replica = _pair(start_queue_server, "--sync-timeout", str(LONG_SYNC_TIMEOUT_S),
                             "--sync-fallback", "async")
    with QueueClient([primary.address, replica.address]) as slot:
        slot.ping()
        assert slot.address == ("127.0.0.1", primary.port)
        with frozen(replica):
            putting, out = in_thread(lambda: _reply_put(slot))
            putting.join(LOCK_S)
        assert "value" in out, out
        # Answered when the primary went on alone, at sync_timeout_s: the wait was the hold.
        assert out["seconds"] >= LONG_SYNC_TIMEOUT_S * 0.9, out
        assert _jobs_of(primary, "q_reply") == [b"the answer"]


def test_a_reply_held_until_a_silent_replica_confirms_is_put_once(start_queue_server: Any) -> None:
    primary, replica = _pair(start_queue_server, "--sync-timeout", "1")
    with QueueClient([primary.address, replica.address]) as slot:
        slot.ping()
        assert slot.address == ("127.0.0.1", primary.port)
        with frozen(replica):
            putting, out = in_thread(lambda: _reply_put(slot))
            watcher = primary.connect()
            poll_until(lambda: role(watcher)[1] == b"refusing", what="the primary refusing")
            time.sleep(SILENT_S)  # the replica's silence is the scenario, not a condition
        putting.join(LOCK_S)
        assert "value" in out, out
        assert _jobs_of(primary, "q_reply") == [b"the answer"]


def test_the_asyncio_client_waits_for_the_held_reply_too(start_queue_server: Any) -> None:
    primary, replica = _pair(start_queue_server, "--sync-timeout", str(LONG_SYNC_TIMEOUT_S),
                             "--sync-fallback", "async")

    async def reply_put() -> float:
        async with AsyncQueueClient([primary.address, replica.address]) as slot:
            await slot.ping()
            with frozen(replica):
                started = time.monotonic()
                await slot.put("q_reply", b"the answer", item="_7", until=time.monotonic() + LOCK_S)
                return time.monotonic() - started

    assert asyncio.run(reply_put()) >= LONG_SYNC_TIMEOUT_S * 0.9
    assert _jobs_of(primary, "q_reply") == [b"the answer"]


def test_a_keyed_put_held_by_a_refusing_primary_is_waited_for(start_queue_server: Any) -> None:
    primary, replica = _pair(start_queue_server, "--sync-timeout", "1")
    with QueueClient([primary.address, replica.address]) as producer:
        producer.ping()
        with frozen(replica):
            putting, out = in_thread(lambda: producer.put_job("q", b"the job", key="k"))
            watcher = primary.connect()
            poll_until(lambda: role(watcher)[1] == b"refusing", what="the primary refusing")
            time.sleep(SILENT_S)  # the replica's silence is the scenario, not a condition
        putting.join(LOCK_S)
        assert "value" in out, out
        assert out["value"].existing_state is None, out  # acknowledged as stored, not as taken
        assert _jobs_of(primary, "q") == [b"the job"]
