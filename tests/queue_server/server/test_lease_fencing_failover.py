"""Audit door 1 of issue 25, "a deposed primary hands out a job", with real processes: three
queue servers in sync mode and a real manager as sentinel. A client waits in GETB on the
primary; the primary is frozen until a replica is promoted, then thawed (and told to
FOLLOW). It must not hand the waiting client a job, the new primary's ids are none the
old one gave, a stale DONE meets 404 and deletes nothing, and a lease the old primary
gave before (replicated) is still accepted by the new one."""
from __future__ import annotations

import time

from tests.queue_server.server.ha import frozen
from tests.queue_server.server.ha_cluster import FAILOVER_DEADLINE_S, HaCluster
from tests.queue_server.server.test_lease_fencing import EPOCH_ERAS_IDS, answer_of_blocked
from tests.queue_server.server.test_managed_failover import ha  # noqa: F401  (the fixture)
from tests.queue_server.util import barrier, get_job, poll_until, put_ok, total


def test_a_deposed_primary_hands_out_no_job_and_its_ids_meet_404(ha: HaCluster) -> None:  # noqa: F811
    old = ha.servers[0]
    admin = old.connect()
    put_ok(admin, "pre", 0, b"pre")
    running = get_job(admin, "GET pre").id  # replicated before the freeze (sync mode)
    waiter = old.connect()
    waiter.send(b"GETB work\r\n")
    barrier(admin)
    assert waiter.pending() == b""
    with frozen(old):
        new = poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                         what=lambda: f"a new primary: {ha.views()}")
    poll_until(lambda: (v := ha.views()[old.address]) is not None and v[0] == b"replica"
               and int(v[4]) == 2, timeout_s=FAILOVER_DEADLINE_S,
               what=lambda: f"the old primary following: {ha.views()}")
    producer = new.connect(timeout_s=10.0)
    for data in (b"job0", b"job1", b"hi"):
        put_ok(producer, "work", 0, data)
    poll_until(lambda: sum(total(old.connect(timeout_s=10.0), "work")[2:]) == 3,
               timeout_s=FAILOVER_DEADLINE_S, what="the jobs applied on the deposed primary")
    answer = answer_of_blocked(waiter)
    assert answer in (b"", b"500 Offline Mode\r\n"), f"the deposed primary answered {answer!r}"
    assert total(old.connect(timeout_s=10.0), "work") == (1, 1, 3, 0), "a replica handed out"
    assert total(producer, "work") == (1, 1, 3, 0)
    consumer = new.connect(timeout_s=10.0)
    job = get_job(consumer, "GET work")
    assert job.data == b"job0" and job.id >= 2 * EPOCH_ERAS_IDS
    # The ids the old primary would have given next are none of the new one's.
    for stale in range(running + 1, running + 4):
        assert consumer.request(b"DONE %d" % stale) == b"404 Job Not Found"
    assert total(consumer, "work") == (1, 1, 2, 1), "a stale DONE deleted a job"
    assert consumer.request(b"DONE %d" % running).startswith(b"200 OK")  # a replicated lease
    assert consumer.request(b"DONE %d" % job.id) == b"200 OK"


def test_a_lease_from_before_the_failover_that_nobody_renews_comes_back_uncharged(ha: HaCluster) -> None:  # noqa: F811
    """A hand-out whose reply died with the primary (issue 25 point 1: a slot cannot know the
    job it never got) reaches the new primary as a running lease nobody holds. At its lock's
    end it is given back at the head of its queue with its attempt not counted; a lease its
    holder renewed on the new primary expires as a failed attempt, as before."""
    from queue_server.client import QueueClient

    lock_s = 2.0
    with QueueClient(ha.addresses, timeout_s=10.0) as client:
        orphan_key = client.put("inherit", b"orphan")
        [orphan] = client.get("inherit", expire_s=lock_s, keys=True)
        held_key = client.put("inherit", b"held")
        [held] = client.get("inherit", expire_s=lock_s, keys=True)
        ha.servers[0].kill()
        poll_until(lambda: ha.primary(epoch_above=1), timeout_s=FAILOVER_DEADLINE_S,
                   what=lambda: f"a new primary: {ha.views()}")
        # The holder of `held` finds the new primary and renews; nobody holds `orphan`.
        assert client.touch(held.id, expire_s=lock_s, until=time.monotonic() + FAILOVER_DEADLINE_S) == [True]
        back = poll_until(lambda: (i := client.job(orphan_key)) is not None and i.state != "running" and i,
                          what="the orphaned lease's end")
        assert back.state == "ready" and back.attempts == 0 and back.error is None, back
        failed = poll_until(lambda: (i := client.job(held_key)) is not None and i.state != "running" and i,
                            what="the renewed lease's end")
        assert failed.error is not None and failed.error.startswith("lock expired"), failed
        [again] = client.get("inherit", keys=True)
        assert again.data == b"orphan" and again.attempt == 1 and again.id != orphan.id
