"""What a client does while its primary is frozen (SIGSTOP: its kernel still accepts and
keeps connections, nothing answers), past the slot's own requests
(test_failover_frozen_primary_clients.py): three real queue servers in sync mode under a
real manager (the sentinel), clients with their default timeouts (timeout_s 30,
connect_timeout_s 3).

- An asyncio client idle in a checked GETB (`check_s`, follow.py WAIT_CHECK_S) fetches a job
  put on the promoted replica while the old primary is still frozen, as the blocking client
  does. Before, the asyncio client ignored `check_s` and stayed on the frozen server until
  it thawed.
- A producer's `put` with its own key, and a read (`job`), sent to the frozen primary are
  answered by the new one within seconds. Before, each waited the client's 30 s for the
  reply and raised ReplyTimeout.
- `result(timeout=...)` waiting on the frozen primary gets the result stored on the new one
  within seconds. Before, its wait stayed on the frozen server for the timeout plus the
  client's 30 s, and raised ReplyTimeout although the job was done with its result."""
from __future__ import annotations

import asyncio
import time
from typing import Any

import psutil

from queue_server.client import AsyncQueueClient, QueueClient
from queue_server.client.follow import WAIT_CHECK_S
from tests.queue_server.server.ha import frozen, in_thread
from tests.queue_server.server.ha_cluster import FAILOVER_DEADLINE_S, HaCluster
from tests.queue_server.server.test_failover_frozen_primary_clients import (
    FETCHED_WITHIN_S,
    FOLLOWED_WITHIN_S,
    LOCK_S,
)
from tests.queue_server.server.test_managed_failover import ha  # noqa: F401  (the fixture)
from tests.queue_server.util import poll_until


def _still_frozen(server: Any) -> bool:
    return psutil.Process(server.process.pid).status() == psutil.STATUS_STOPPED


def _new_primary(ha: HaCluster) -> Any:  # noqa: F811
    return poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                      what=lambda: f"a new primary: {ha.views()}")


def test_an_idle_asyncio_wait_fetches_from_the_new_primary_while_the_old_one_is_frozen(ha: HaCluster) -> None:  # noqa: F811
    old = ha.servers[0]
    at: dict[str, Any] = {}

    async def wait_for_a_job() -> list[Any]:
        async with AsyncQueueClient(ha.addresses) as waiter:
            await waiter.ping()  # on the primary: the GETB waits there
            at["first"] = waiter.address
            jobs = await waiter.get("q", block=True, keys=True, check_s=WAIT_CHECK_S,
                                    until=time.monotonic() + FETCHED_WITHIN_S)
            at["then"] = waiter.address
            return jobs

    with QueueClient(ha.addresses) as producer:
        fetching, out = in_thread(lambda: asyncio.run(wait_for_a_job()))
        poll_until(lambda: "first" in at, what="the asyncio client on the primary")
        assert at["first"] == ("127.0.0.1", old.port)
        with frozen(old):
            frozen_at = time.monotonic()
            new = _new_primary(ha)
            producer.put("q", b"put after the promotion", key="k")
            fetching.join(FETCHED_WITHIN_S + 10)
            still_frozen = _still_frozen(old)
            fetched_after_s = time.monotonic() - frozen_at
        assert [job.key for job in out.get("value", [])] == ["k"], out
        assert still_frozen, "fetched only after the thaw"
        assert fetched_after_s < FETCHED_WITHIN_S, f"fetched {fetched_after_s:.1f} s after the freeze"
        assert at["then"] == ("127.0.0.1", new.port)
        info = producer.job("k")
        assert info is not None and (info.state, info.attempts) == ("running", 1), info


def test_a_keyed_put_and_a_read_sent_to_a_frozen_primary_go_to_the_new_one(ha: HaCluster) -> None:  # noqa: F811
    old = ha.servers[0]
    with QueueClient(ha.addresses) as producer, QueueClient(ha.addresses) as reader:
        producer.put("q", b"put before the freeze", key="before")
        reader.ping()
        assert producer.address == reader.address == ("127.0.0.1", old.port)
        with frozen(old):
            putting, out = in_thread(lambda: producer.put("q", b"put into the freeze", key="p"))
            reading, read = in_thread(lambda: reader.job("before"))
            putting.join(FOLLOWED_WITHIN_S + 35)
            reading.join(FOLLOWED_WITHIN_S + 35)
            still_frozen = _still_frozen(old)
            new = _new_primary(ha)
        assert "error" not in out, out
        assert "error" not in read and read["value"].state == "ready", read
        assert still_frozen, "answered only after the thaw"
        assert out["seconds"] < FOLLOWED_WITHIN_S, f"stored {out['seconds']:.1f} s after the freeze"
        assert read["seconds"] < FOLLOWED_WITHIN_S, f"read {read['seconds']:.1f} s after the freeze"
        assert producer.address == reader.address == ("127.0.0.1", new.port)
        info = producer.job("p")
        assert info is not None and info.state == "ready", info
        assert producer.total("q").jobs == 2  # each stored once


def test_a_result_wait_on_a_frozen_primary_gets_the_result_from_the_new_one(ha: HaCluster) -> None:  # noqa: F811
    old = ha.servers[0]
    with QueueClient(ha.addresses, timeout_s=10.0) as worker, QueueClient(ha.addresses) as caller:
        worker.put("q", b"question", key="r")
        [job] = worker.get("q", expire_s=LOCK_S, keys=True)
        waiting, out = in_thread(lambda: caller.result("q", "r", timeout=LOCK_S))
        poll_until(lambda: caller.address is not None, what="the caller waiting")
        assert caller.address == ("127.0.0.1", old.port)
        with frozen(old):
            frozen_at = time.monotonic()
            _new_primary(ha)
            assert worker.done_with_result(job.id, b"the answer", until=time.monotonic() + LOCK_S).found
            waiting.join(FOLLOWED_WITHIN_S + 10)
            still_frozen = _still_frozen(old)
            answered_after_s = time.monotonic() - frozen_at
        assert out.get("value") == "the answer", out
        assert still_frozen, "answered only after the thaw"
        assert answered_after_s < FOLLOWED_WITHIN_S, f"answered {answered_after_s:.1f} s after the freeze"
