"""DONE counts every job's run time exactly, also when it finds a GET ... COUNT batch's
bucket once (store_core.py): batches of different hand-out times and queues in one DONE."""
from __future__ import annotations

import time

from queue_server.server.latency import BOUNDS, RUN, RUN_SUM, TOTAL, WIDTH
from queue_server.server.store import Store


def _bucket(seconds: float) -> int:
    return next((index for index, bound in enumerate(BOUNDS) if seconds <= bound), len(BOUNDS))


def test_one_done_of_batches_from_two_queues_and_two_hand_outs_counts_each_job() -> None:
    store = Store()
    now = time.time()
    for name in ("a", "b"):
        for _ in range(6):
            store.put(name, 0, b"x", None, now - 500)
    # Two hand-outs per queue, 45 s and 200 s ago (mid-bucket: le 60 and le 300), mixed in one DONE.
    early = store.take(("a",), 3, now - 200, None, None) + store.take(("b",), 2, now - 200, None, None)
    late = store.take(("b",), 4, now - 45, None, None) + store.take(("a",), 3, now - 45, None, None)
    jobs = [early[0], late[0], early[1], late[4], late[1], early[3], late[5], early[2], late[2],
            early[4], late[3], late[6]]
    results = store.done([job.id for job in jobs] + [10_000])
    assert [result.found for result in results] == [True] * 12 + [False]
    finished = time.time()
    for name, from_early, from_late in (("a", 3, 3), ("b", 2, 4)):
        latency = store.queues[name].latency
        assert latency is not None
        latency.settle()
        cells = latency.cells
        runs = cells[RUN:RUN + WIDTH]
        assert runs[_bucket(200.0)] == from_early and runs[_bucket(45.0)] == from_late
        assert sum(runs) == from_early + from_late
        assert sum(cells[TOTAL:TOTAL + WIDTH]) == from_early + from_late
        low = from_early * 200 + from_late * 45
        assert low <= cells[RUN_SUM] <= low + (from_early + from_late) * (finished - now + 1e-5)


def test_a_hand_out_sets_every_field_of_its_job() -> None:
    """_hand_out fills a Job slot by slot (no __init__): none may be left unset."""
    from queue_server.server.store_types import Job

    store = Store()
    store.put("q", 3, b"x", None, time.time())
    (job,) = store.take(("q",), 1, time.time(), 30.0, None)
    unset = [name for name in Job.__slots__ if not hasattr(job, name)]
    assert unset == []
    assert (job.priority, job.data, job.attempts, job.lock_s) == (3, b"x", 1, 30.0)
