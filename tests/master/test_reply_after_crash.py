"""A slot that dies after it sent its reply PUT and before its DONE: the master settles the
batch from the slot's REPLY note and sends the reply again (master/settle.py). Real queue
server, master and slot (handlers/sm_test_replies.py). The two sends name the same key, so
the caller's queue holds one reply, not two."""
from __future__ import annotations

from typing import Any

from master_procs import StartMaster, poll_until
from polling import DEADLINE_S

from queue_server.client import QueueClient
from slot.reply_key import REPLY_KEY_PREFIX

QUEUE = "reply_then_exit"
REPLIES = QUEUE + "_reply"
# Long locks: the job is settled by the master, never by an expiry.
SETTINGS: dict[str, Any] = {"lock_timeout_s": 600.0}


def _settled(client: QueueClient, key: str) -> None:
    """The master's DONE follows its reply PUT (master/settle.py orders them)."""
    poll_until(lambda: (info := client.job(key)) is not None and info.state == "done",
               what=f"job {key} done by the master")


def test_a_reply_sent_before_the_slot_died_is_one_reply_job(
    start_master: StartMaster, queue_server_for: Any
) -> None:
    server = queue_server_for({QUEUE: SETTINGS, REPLIES: {}})
    master = start_master(modules=["sm_test_replies"], static_slots={QUEUE: 1},
                          queues={QUEUE: SETTINGS}, server=server)
    client = master.client()
    key = client.put_job(QUEUE, b"q1", item="caller1", key="call-1").key
    _settled(client, key)
    master.wait_report(lambda r: sum(r.crash_counts.get(QUEUE, {}).values()) >= 1,
                       what="the slot's death counted")
    replies = client.get(REPLIES, count=100, keys=True)
    assert [(job.data, job.item) for job in replies] == [(b"answer to q1", "caller1")], \
        f"{len(replies)} reply jobs\n{master.log_tail()}"
    assert replies[0].key is not None and replies[0].key.startswith(REPLY_KEY_PREFIX)


def test_a_call_whose_slot_died_after_replying_gets_one_reply_and_leaves_none(
    start_master: StartMaster, queue_server_for: Any
) -> None:
    """call() takes the slot's reply at once and finishes it, which frees its key: the
    master finds it kept (finished) under that key and does not send it again; before, the
    master's PUT left a second reply in the queue until its TTL."""
    server = queue_server_for({QUEUE: SETTINGS, REPLIES: {}})
    master = start_master(modules=["sm_test_replies"], static_slots={QUEUE: 1},
                          queues={QUEUE: SETTINGS}, server=server)
    client = master.client()
    answer = client.call(QUEUE, b"q2", timeout_s=DEADLINE_S)
    assert answer.data == b"answer to q2"
    poll_until(lambda: client.stats(QUEUE)[QUEUE].done == 1, what="the call's job done by the master")
    assert client.get(REPLIES, count=100, keys=True) == [], master.log_tail()
    assert "sent by its slot before it died" in master.log_text()
