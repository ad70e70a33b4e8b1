"""A following replica fires no timer of its own (issue 9, replica drift): a managed lease's
expiry on the replica is the primary's SYNC FAIL (same retry time, same attempts), a lock
the primary renews stays running there, and once promoted the replica fires the deadlines
it inherited. Real primary and replica processes."""
from __future__ import annotations

import itertools
import time

from polling import DEADLINE_S

from queue_server.client import QueueClient
from queue_server.protocol.client_errors import OfflineError
from queue_server.protocol.replies import Job
from tests.queue_server.util import poll_until

RENEWED_LOCK_S = 2
# A long retry base: the jitter (0-25% of 30 s) would show any retry time of the replica's own.
SLOW_RETRY = """
[queues.q]
max_attempts = 5
retry_base_s = 30
retry_max_s = 60
"""


def _client(server) -> QueueClient:  # type: ignore[no-untyped-def]
    return QueueClient(f"127.0.0.1:{server.port}")


def _online(client: QueueClient) -> bool:
    try:
        client.put("probe", b"p")
    except OfflineError:
        return False  # 500 Offline Mode: still following
    return True


def _renewed_past_expiry(client: QueueClient, follower: QueueClient, key: str) -> tuple[Job, str] | None:
    """A job `key` locked for RENEWED_LOCK_S, renewed every 0.25 s past its first lock end,
    the replica showing it running throughout: (the job, key); None when a renewal that
    found it gone came too late to tell (RENEWED_LOCK_S * 0.9 after the one before was sent:
    a busy machine held the test or a server back, and the lock may rightly have lapsed)."""
    client.put("q", b"kept", key=key)
    renewed_at = time.monotonic()  # the lock starts after this
    [kept] = client.get("q", keys=True, expire_s=RENEWED_LOCK_S)
    first_lock_end = time.time() + RENEWED_LOCK_S
    while time.time() < first_lock_end + 2:
        sent_at = time.monotonic()
        if client.touch(kept.id, expire_s=RENEWED_LOCK_S) != [True]:
            assert time.monotonic() - renewed_at >= RENEWED_LOCK_S * 0.9, "the lock lapsed while renewed"
            return None
        renewed_at = sent_at
        poll_until(lambda: (i := follower.job(key)) is not None and i.state == "running",
                   timeout_s=DEADLINE_S)
        time.sleep(0.25)  # the renewal cadence, well inside the lock
    assert follower.job(key).lease_id == kept.id  # type: ignore[union-attr]
    return kept, key


def test_a_replica_mirrors_the_primarys_expiries_and_fires_its_own_once_promoted(
    start_queue_server,  # type: ignore[no-untyped-def]
) -> None:
    primary = start_queue_server("--fsync", "never", config=SLOW_RETRY)
    replica = start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{primary.port}",
                                 "--server-id", "2", "--promote-after", "8", config=SLOW_RETRY)
    with _client(primary) as client, _client(replica) as follower:
        client.put("q", b"short", key="short")
        poll_until(lambda: follower.job("short") is not None, timeout_s=DEADLINE_S)

        # 1. The primary expires a managed lease: the replica shows exactly its outcome.
        locked_from = time.time()
        assert len(client.get("q", keys=True, expire_s=0.5)) == 1
        expired = poll_until(lambda: (i := client.job("short")) is not None and i.state == "failed" and i,
                             timeout_s=DEADLINE_S, what="the primary expiring the lease")
        assert expired.attempts == 1 and expired.error == "lock expired after 0.5 s"
        poll_until(lambda: follower.job("short") == expired, timeout_s=DEADLINE_S,
                   what="the replica showing the primary's expiry")
        # The 30 s base, counted from before the lock (from after the polls above, a busy
        # machine could eat the 15 s of room).
        assert expired.next_run_at is not None and expired.next_run_at > locked_from + 15

        # 2. A lock the primary keeps renewing past its first expiry stays running there.
        keys = (f"kept{n}" for n in itertools.count())
        kept, key = poll_until(lambda: _renewed_past_expiry(client, follower, next(keys)),
                               timeout_s=DEADLINE_S, what="a round of renewals never 1.8 s apart")

        # 3. The primary dies with the lock held: nothing expires while the replica follows,
        # and once promoted it fires the expiry itself. Nobody could renew the lease while no
        # primary served (issue 25): it is given back uncharged, not failed.
        assert client.touch(kept.id, expire_s=1) == [True]
        lock_end = time.time() + 1
        poll_until(lambda: follower.job(key) is not None
                   and follower.job(key).state == "running", timeout_s=DEADLINE_S)  # type: ignore[union-attr]
        primary.kill()
        poll_until(lambda: time.time() > lock_end + 1.0, timeout_s=5, what="the lock passing")
        still = follower.job(key)
        promoted_already = _online(follower)
        assert not promoted_already, "promoted within about 2 s of an 8 s promote_after: test inconclusive"
        assert still is not None and still.state == "running"  # a follower expires nothing
        poll_until(lambda: _online(follower), timeout_s=DEADLINE_S, what="promotion")
        fired = poll_until(lambda: (i := follower.job(key)) is not None and i.state != "running" and i,
                           timeout_s=DEADLINE_S, what="the promoted replica expiring the lease")
        assert fired.state == "ready" and fired.attempts == 0 and fired.error is None, fired
        assert follower.job("short") == expired  # the inherited retry time is kept
