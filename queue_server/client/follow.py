"""Following the primary through a failover (pure): when a request is tried again on the
primary found anew, and how long to pause first.

Two rules, both the client's (queue_server/client/core.py):
- A server that refuses with `500 Offline Mode` (a replica, a deposed primary, one
  restarted and not yet told whom to follow, a primary refusing in sync mode) is never
  asked again on the same connection: the connection is dropped, so the next request asks
  the whole server list (ROLE) for the primary. Before, the connection was kept and a slot
  asked the same restarted old primary every 5 s for minutes while the new one held its
  jobs (issue 25).
- A request given `until` (a time.monotonic() deadline: a running job's lock, for DONE,
  LATER, FAIL, TOUCH and a reply) is sent again to the primary found anew after a refusal
  *and* after a lost connection or a missing reply, until then. Sending an outcome again is
  safe: it names a lease id, which the new primary holds in sync mode (the hand-out was
  replicated before it was answered) and a stale one meets `404`, never another job once
  ids carry the epoch; a `404` on a resent outcome may mean the first one was applied
  before the old primary died, which the caller tells apart by the job's key (slot/source.py).
"""
from __future__ import annotations

from typing import Final

from queue_server.protocol.client_errors import ConnectionLost, OfflineError

# Between two tries while following: the sentinel promotes 1.25-1.5 s after a kill, so a
# client polls the server list about eight times before the new primary answers.
FOLLOW_RETRY_S: Final = 0.2
# How long a request that follows the primary waits for its reply before it goes to the
# primary found anew (below the client's timeout_s). A frozen primary (SIGSTOP, a paused
# VM) still takes the request into its socket and never answers: with the client's 30 s a
# DONE sent to it reached the new primary (promoted 2 s after the freeze) only after 60 s
# (30 s for the reply, 30 s more in the handshake with the frozen server, core.py), past
# a 60 s lock, so the job ran again. A live primary answers an outcome at once, or after
# holding it for its replicas: sync_timeout_s (2 s by default), plus 0.25-0.5 s for the
# manager's consent to go on alone. A reply held longer is no harm either: the outcome
# goes again, and the `404` of one already applied is told apart by the job's key.
FOLLOW_REPLY_S: Final = 5.0
# A wait for jobs (a slot's GETB, with several servers) that has had no reply for this long
# asks its server on a new connection for a PING, answered within connect_timeout_s by any
# live server, held replies or not. A frozen primary (SIGSTOP, a paused VM) accepts the
# connection in its kernel and never answers; nothing else would tell the waiting slot, and
# a job put on the promoted replica 2.5 s after a 30 s freeze was not fetched before the
# thaw. An answer leaves the wait as it was (its connection, its place in line); no answer
# gives the wait up as a wake does (half-close, read what the server had sent), and the
# fetch goes to the primary found anew. One short connection per idle slot this often.
WAIT_CHECK_S: Final = 5.0
# What a given-up wait still reads after its half-close: a server silent for the whole
# check sends nothing more; the bytes it sent before are in flight already.
WAIT_TAIL_S: Final = 0.5


def follows(exc: BaseException) -> bool:
    """Whether a failed request may go again to the primary found anew (within `until`):
    a refusal by a server that is not the primary, a lost connection, no reply in time,
    or no server reachable right now (one restarting)."""
    # ConnectionLost: as raised (ServerUnreachable, ReplyTimeout included); OSError and
    # EOFError: as the faces meet them, before they are raised as ConnectionLost.
    return isinstance(exc, OfflineError | ConnectionLost | OSError | EOFError)


def follow_pause(exc: BaseException, until: float | None, now: float) -> float | None:
    """Seconds to pause before the request goes again to the primary found anew; None
    to raise (no deadline given, past it, or a failure no other server can mend)."""
    if until is None or now >= until or not follows(exc):
        return None
    return min(FOLLOW_RETRY_S, until - now)


def resends_until(now: float, *, servers: int, timeout_s: float) -> float | None:
    """Until when a request without `until` that may go again (read-only, a PUT with the
    producer's own key), with no reply within FOLLOW_REPLY_S, is sent again to the primary
    found anew: the client's `timeout_s` from `now`; None (one reply wait of `timeout_s`)
    with a single server or a timeout_s that short. Before, a producer's PUT sent to a
    frozen primary waited the client's 30 s and raised ReplyTimeout, the replica promoted
    2 s after the freeze."""
    if servers == 1 or timeout_s <= FOLLOW_REPLY_S:
        return None
    return now + timeout_s


def resend_pause(exc: BaseException, until: float, now: float) -> float | None:
    """0 (no pause: the new connection asks the server list) when a request's reply did
    not come in time (resends_until) and `until` is not past; None to raise."""
    if now >= until or not isinstance(exc, TimeoutError):
        return None
    return 0.0
