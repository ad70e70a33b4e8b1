"""A key finished again and again (a producer's recurring key) counts once toward its
queue's keep_done_max and STATS kept (kept.py), in the store, its replay and its snapshot."""
from __future__ import annotations

import time

from queue_server.protocol.retry import QueuePolicy
from queue_server.server import replay, snapshot
from queue_server.server.store import Store

POLICIES = {"q": QueuePolicy(keep_done_max=3), "big": QueuePolicy(keep_done_max=1000)}


def _finish(store: Store, queue: str, key: str) -> None:
    store.put(queue, 0, b"x", None, time.time(), key=key)
    [job] = store.take((queue,), 1, time.time(), None, None)
    assert store.done([job.id])[0].found


def _listed(store: Store, queue: str) -> list[str]:
    return [str(entry[0]) for entry in store.kept_jobs(queue)]


def test_a_key_finished_three_times_does_not_push_other_finished_jobs_out() -> None:
    store = Store(policies=POLICIES)
    _finish(store, "q", "other")
    for _ in range(3):
        _finish(store, "q", "same")
    assert _listed(store, "q") == ["same", "other"]  # two finished jobs, keep_done_max 3
    assert store.queues["q"].kept_count == 2
    _finish(store, "q", "third")
    _finish(store, "q", "fourth")  # now four: the oldest live one goes
    assert _listed(store, "q") == ["fourth", "third", "same"]
    assert store.queues["q"].kept_count == 3


def test_a_recurring_key_keeps_its_deque_bounded_and_replays_to_the_same_kept_jobs() -> None:
    store = Store(policies=POLICIES)
    for n in range(10):
        _finish(store, "big", f"k{n}")
    for _ in range(1000):
        _finish(store, "big", "recurring")
    state = store.queues["big"]
    assert state.kept_count == 11 and len(state.kept or ()) <= 2 * 11 + 64  # compacted
    assert _listed(store, "big") == ["recurring"] + [f"k{n}" for n in range(9, -1, -1)]
    records = b"".join(store.drain_changes())
    rebuilt = Store(policies=POLICIES)
    for command in replay.iter_records(records):
        replay.apply(rebuilt, command, time.time())
    assert _listed(rebuilt, "big") == _listed(store, "big")
    assert rebuilt.queues["big"].kept_count == 11
    copy = snapshot.decode(snapshot.encode(store), time.time(), policies=POLICIES)
    assert _listed(copy, "big") == _listed(store, "big") and copy.queues["big"].kept_count == 11
