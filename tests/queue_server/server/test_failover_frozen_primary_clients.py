"""Clients through a failover of a frozen primary, or a wait on a server that is deposed:
three real queue servers in sync mode under a real manager (the sentinel), clients with
their default timeouts (timeout_s 30, connect_timeout_s 3), as slots and lease keepers use.

- A DONE (and a TOUCH) sent to a primary frozen by SIGSTOP reaches the promoted replica
  within seconds. Before, the request waited the client's 30 s for the frozen server's
  reply, and the reconnect 30 s more in its handshake (INTERCONNECT) with the frozen
  server, which its kernel still accepts: 60.3 s, past a 60 s lock, so running jobs ran
  again (slotmap run --replicas 2, SIGSTOP of the primary for 25 s: acknowledged 9.4 s
  after the freeze now, none re-run).
- A slot idle in GETB on a primary that freezes fetches a job put on the promoted replica
  within seconds, the old primary still frozen, and the job runs once. Before, the wait
  stayed on the frozen server (a job put 2.5 s after a 30 s freeze was not fetched before
  the thaw): the kernel kept the connection, and no reply came to end it.
- result(timeout=...) waits on across a kill -9 of the primary. Before, its wait, moved to
  a replica, was answered `500 Offline Mode` when that replica was told to follow the new
  primary, and result() raised OfflineError although the job was done, with its result,
  on the new primary within the wait."""
from __future__ import annotations

import time
from typing import Any

import psutil

from queue_server.client import QueueClient
from slot.loop import SourceUnavailable
from slot.source import ClientSource
from slot.wake import Waker
from tests.queue_server.server.ha import frozen, in_thread, role
from tests.queue_server.server.ha_cluster import FAILOVER_DEADLINE_S, HaCluster
from tests.queue_server.server.test_managed_failover import ha  # noqa: F401  (the fixture)
from tests.queue_server.util import poll_until

LOCK_S = 60.0  # the queues' default lock time
# From the freeze to the outcome on the new primary: the reply waited for (follow.py
# FOLLOW_CHECK_S, 2 s), the check's ROLE unanswered (connect_timeout_s, 3 s), the frozen
# server's handshake (connect_timeout_s, 3 s), the promotion (2 s) overlapping, with room
# for a loaded box; well under the lock (before: 60.3 s).
FOLLOWED_WITHIN_S = 25.0
# From the freeze to the job fetched on the new primary: the wait's check (follow.py
# WAIT_CHECK_S, 5 s), its PING unanswered (connect_timeout_s, 3 s), the tail read (0.5 s),
# the reconnect's handshake with the frozen server (3 s); the promotion (2 s) overlaps.
FETCHED_WITHIN_S = 30.0


def test_outcomes_sent_to_a_frozen_primary_reach_the_new_one_within_seconds(ha: HaCluster) -> None:  # noqa: F811
    old = ha.servers[0]
    with QueueClient(ha.addresses) as slot, QueueClient(ha.addresses) as keeper:
        slot.put("q", b"done me", key="d")
        slot.put("q", b"touch me", key="t")
        done_job, touched = slot.get("q", count=2, expire_s=LOCK_S, keys=True)
        keeper.ping()  # both on the primary before it freezes
        with frozen(old):
            done, done_out = in_thread(lambda: slot.done(done_job.id, until=time.monotonic() + LOCK_S))
            touch, touch_out = in_thread(lambda: keeper.touch(touched.id, until=time.monotonic() + LOCK_S))
            done.join(LOCK_S)
            touch.join(LOCK_S)
            new = poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                             what=lambda: f"a new primary: {ha.views()}")
        assert "error" not in done_out and done_out["value"][0].found, done_out
        assert "error" not in touch_out and touch_out["value"] == [True], touch_out
        assert done_out["seconds"] < FOLLOWED_WITHIN_S, f"DONE reached the new primary after {done_out['seconds']:.1f} s"
        assert touch_out["seconds"] < FOLLOWED_WITHIN_S, f"TOUCH reached the new primary after {touch_out['seconds']:.1f} s"
        assert slot.address == keeper.address == ("127.0.0.1", new.port)
        finished = slot.job("d")
        assert finished is not None and (finished.state, finished.attempts) == ("done", 1), finished
        info = slot.job("t")
        assert info is not None and info.state == "running" and info.attempts == 1, info


def test_a_result_wait_goes_on_across_the_primarys_kill(ha: HaCluster) -> None:  # noqa: F811
    with QueueClient(ha.addresses, timeout_s=10.0) as worker, QueueClient(ha.addresses) as caller:
        worker.put("q", b"question", key="r")
        [job] = worker.get("q", expire_s=LOCK_S, keys=True)
        waiting, out = in_thread(lambda: caller.result("q", "r", timeout=LOCK_S))
        poll_until(lambda: caller.address is not None, what="the caller waiting")
        ha.servers[0].kill()
        poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                   what=lambda: f"a new primary: {ha.views()}")
        # Every server has been told the new epoch: a wait moved to a replica was answered by then.
        poll_until(lambda: all(v is None or int(v[4]) == 2 for v in ha.views().values()),
                   timeout_s=FAILOVER_DEADLINE_S, what=lambda: f"all in epoch 2: {ha.views()}")
        assert worker.done_with_result(job.id, b"the answer", until=time.monotonic() + LOCK_S).found
        waiting.join(LOCK_S)
        assert out.get("value") == "the answer", out


def _fetch_as_the_loop_does(source: ClientSource) -> tuple[list[Any], list[str]]:
    """slot/loop.py's fetch: a SourceUnavailable is retried (the loop pauses 0.1-5 s)."""
    failures: list[str] = []
    while len(failures) < 5:
        try:
            jobs = source.fetch("q", count=1, lock_s=LOCK_S)
        except SourceUnavailable as exc:
            failures.append(str(exc))
            continue
        assert jobs is not None, "woken: nothing woke it"
        return list(jobs), failures
    raise AssertionError(f"no fetch: {failures}")


def test_an_idle_slot_fetches_from_the_new_primary_while_the_old_one_is_frozen(ha: HaCluster) -> None:  # noqa: F811
    old = ha.servers[0]
    waker = Waker()
    try:
        with QueueClient(ha.addresses) as slot, QueueClient(ha.addresses) as producer:
            slot.ping()  # on the primary: the fetch's GETB waits there
            assert slot.address == ("127.0.0.1", old.port)
            source = ClientSource(slot, waker)
            fetching, out = in_thread(lambda: _fetch_as_the_loop_does(source))
            with frozen(old):
                new = poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                                 what=lambda: f"a new primary: {ha.views()}")
                producer.put("q", b"put after the promotion", key="k")
                fetching.join(FAILOVER_DEADLINE_S)
                still_frozen = psutil.Process(old.process.pid).status() == psutil.STATUS_STOPPED
                assert "value" in out, f"not fetched while the old primary was frozen: {out}"
                jobs, _failures = out["value"]
                assert [job.key for job in jobs] == ["k"], out
                assert still_frozen, "fetched only after the thaw"
                assert out["seconds"] < FETCHED_WITHIN_S, f"fetched {out['seconds']:.1f} s after the freeze"
                assert slot.address == ("127.0.0.1", new.port)
                source.done([jobs[0].id])
            poll_until(lambda: role(old.connect(timeout_s=10.0))[0] == b"replica",
                       timeout_s=FAILOVER_DEADLINE_S, what=lambda: f"the thawed one follows: {ha.views()}")
            info = producer.job("k")
            assert info is not None and (info.state, info.attempts) == ("done", 1), info
            # Nothing handed out by the thawed server, nor twice: no job runs anywhere.
            assert producer.runlist() == [], producer.runlist()
            with QueueClient(old.address) as thawed:
                assert thawed.runlist() == []
    finally:
        waker.close()
