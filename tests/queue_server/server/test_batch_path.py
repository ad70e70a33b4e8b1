"""The batch path's shortcuts (a slot's GET q COUNT 10 then DONE of 10 ids) answer and record
exactly what the general code does: take's inlined first-of-level pop, _hand_out's inlined
SYNC GET formatting, batch_reply's inlined job line, parse_ids converting in C."""
from __future__ import annotations

import random

import pytest

from queue_server.protocol.errors import ProtocolError
from queue_server.protocol.numbers import parse_id, parse_ids
from queue_server.server import records
from queue_server.server.responses import _job_head, batch_reply
from queue_server.server.store import Store


def _filled(seed: int) -> Store:
    """Jobs of three priorities, some with items, some deleted while others stood before them
    (skipped when reached: QueueState.take_out_ready), one level emptied down to one job."""
    rng = random.Random(seed)
    store = Store(rng=random.Random(1))
    keys = []
    for n in range(60):
        priority = rng.choice((0, 5, 9))
        keys.append(store.put("q", priority, b"job %d" % n, f"item{n % 4}" if n % 3 == 0 else None, 1000.0 + n))
    store.delete("q", [key for key in keys if rng.random() < 0.2])
    store.drain_changes()
    return store


@pytest.mark.parametrize("expire_s", [None, 30.0])
def test_a_one_queue_batch_takes_and_records_what_the_general_loop_does(expire_s: float | None) -> None:
    for seed in range(5):
        fast, general = _filled(seed), _filled(seed)
        for count in (10, 10, 1, 7, 50):
            # ("q",): the one-queue loop; None: every queue, the general loop (one queue here)
            got = fast.take(("q",), count, 2000.0, expire_s, None, by=b" BY slot.1")
            want = general.take(None, count, 2000.0, expire_s, None, by=b" BY slot.1")
            assert [(job.id, job.priority, job.data, job.item, job.key) for job in got] == \
                   [(job.id, job.priority, job.data, job.item, job.key) for job in want]
            assert fast.drain_changes() == general.drain_changes()


def test_the_inlined_sync_get_is_records_get() -> None:
    store = Store()
    store.put("q", 4, b"x", None, 1000.0)
    store.put("q", 4, b"y", None, 1000.0)
    store.drain_changes()
    (job,) = store.take(("q",), 1, 1000.5, None, None, by=b" BY a")
    (last,) = [store.take_last("q", 4, 1000.5, None, None, by=b"")]
    assert store.drain_changes() == [
        records.get("q", job.id, 4, False, None, False, False, b" AT 1000.500000", b" BY a"),
        records.get("q", last.id, 4, True, None, False, False, b" AT 1000.500000", b""),
    ]


def test_a_batch_reply_is_each_jobs_head_and_data() -> None:
    store = _filled(3)
    jobs = store.take(("q",), 20, 2000.0, None, None)
    assert any(job.item for job in jobs) and any(job.item is None for job in jobs)
    for keys in (False, True):
        parts = [b"200 OK %d JOBS\r\n" % len(jobs)]
        for job in jobs:
            parts += [_job_head(job, keys), job.data]
        assert batch_reply(jobs, keys) == parts


def test_ids_converted_at_once_are_those_parsed_one_by_one() -> None:
    raws = [b"1", b"0", b"42", b"999999999999999999", b"007"]
    assert parse_ids(raws) == tuple(parse_id(raw) for raw in raws)
    for bad in (b"x1", b"1000000000000000000", b"-1", b"", b"1 ", b"1_0", b"\xd9\xa1"):
        with pytest.raises(ProtocolError) as one:
            parse_id(bad)
        with pytest.raises(ProtocolError) as among:
            parse_ids([b"5", bad, b"6"])
        assert str(among.value) == str(one.value)


def test_a_done_reply_and_record_of_many_jobs_say_what_each_one_alone_says() -> None:
    from queue_server.server.responses import done_reply
    from queue_server.server.store_types import _DONE, NOT_FOUND, DoneResult

    plain = _DONE[False, False]
    for results in ([plain] * 10, [plain, NOT_FOUND, plain], [plain, _DONE[True, False]], [DoneResult(True)] * 2,
                    [_DONE[True, True], _DONE[False, True]], []):
        assert done_reply(results) == b"".join(done_reply([result]) for result in results)
    assert done_reply([plain, NOT_FOUND]) == b"200 OK\r\n404 Job Not Found\r\n"
    assert records.done([7, 8, 1234567], b"1.000000") == b"SYNC DONE 7 8 1234567 AT 1.000000\r\n"
