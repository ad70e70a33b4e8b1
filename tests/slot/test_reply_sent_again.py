"""A slot's reply PUT sent again (slot/source.py reply, queue_server/client/follow.py) is one
job while the first one waits: two real queue servers in sync mode (a primary and a replica
that never promotes itself), the primary stalled by SIGSTOP longer than the client's check
that it still answers, then thawed. The client gives the reply up as sent to a frozen
server and sends it again once the primary answers; the first PUT was in the primary's
socket all along and is stored at the thaw. Without a key of its own the reply was two jobs.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from queue_server.client import QueueClient
from slot.reply_key import REPLY_KEY_PREFIX, Reply
from slot.source import ClientSource
from slot.wake import Waker
from tests.queue_server.server.ha import frozen, role
from tests.queue_server.util import poll_until

FAST = ("--fsync", "never")
LOCK_S = 60.0
# The client's check that a server answers (connect_timeout_s) is short, so a stall of
# STALL_S reads as a frozen server: follow.py FOLLOW_CHECK_S (2 s) + CHECK_TIMEOUT_S.
CHECK_TIMEOUT_S = 0.5
STALL_S = 4.0


def _pair(start_queue_server: Any) -> tuple[Any, Any]:
    primary = start_queue_server(*FAST, "--replicate", "sync", "--server-id", "1", "--sync-timeout", "5")
    replica = start_queue_server(*FAST, "--replicate", "sync", "--server-id", "2",
                                 "--replica-of", primary.address, "--promote-after", "3600")
    conn = primary.connect()
    poll_until(lambda: role(conn)[1:3] == [b"sync", b"1"], what="the replica linked")
    return primary, replica


def test_a_reply_sent_again_after_a_stall_is_one_job(start_queue_server: Any) -> None:
    primary, replica = _pair(start_queue_server)
    waker = Waker()
    try:
        with QueueClient([primary.address, replica.address],
                         connect_timeout_s=CHECK_TIMEOUT_S) as client:
            client.put("q", b"question", item="_7")
            source = ClientSource(client, waker)
            jobs = source.fetch("q", count=1, lock_s=LOCK_S)
            assert jobs is not None and len(jobs) == 1
            out: dict[str, Any] = {}

            def reply() -> None:
                try:
                    source.reply("q_reply", [Reply(jobs[0].id, "_7", b"the answer")], ttl_s=600.0)
                    out["done"] = True
                except Exception as exc:  # the test reports it: noqa: BLE001
                    out["error"] = exc

            with frozen(primary):
                replying = threading.Thread(target=reply, daemon=True)
                replying.start()
                time.sleep(STALL_S)  # the stall is the scenario, not a condition
            replying.join(LOCK_S)
            assert out == {"done": True}, out
            source.done([jobs[0].id])
        with QueueClient(primary.address, timeout_s=30.0) as reader:
            replies = reader.get("q_reply", count=100, keys=True)
        assert [job.data for job in replies] == [b"the answer"]
        assert replies[0].key is not None and replies[0].key.startswith(REPLY_KEY_PREFIX)
    finally:
        waker.close()
