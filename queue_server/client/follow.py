"""Following the primary through a failover (pure): when a request is tried again on the
primary found anew, and how long to pause first.

Three rules, all the client's (queue_server/client/core.py):
- A server that refuses with `500 Offline Mode` (a replica, a deposed primary, one
  restarted and not yet told whom to follow, a primary refusing in sync mode) is never
  asked again on the same connection: the connection is dropped, so the next request asks
  the whole server list (ROLE) for the primary. Before, the connection was kept and a slot
  asked the same restarted old primary every 5 s for minutes while the new one held its
  jobs (issue 25).
- A request given `until` (a time.monotonic() deadline: a running job's lock, for DONE,
  LATER, FAIL, TOUCH and a reply) is sent again to the primary found anew after a refusal
  *and* after a lost connection or a reply missing from a server that no longer answers,
  or no longer may (FOLLOW_CHECK_S: a live primary that holds the reply is waited for,
  never sent the request again), until then. Sending an outcome again is safe: it names a lease id, which
  the new primary holds in sync mode (the hand-out was replicated before it was answered)
  and a stale one meets `404`, never another job once ids carry the epoch; a `404` on a
  resent outcome may mean the first one was applied before the old primary died, which the
  caller tells apart by the job's key (slot/source.py). A PUT sent again is a second job
  unless it has a key that the first one still holds (slot/source.py gives replies one).
- A request without `until` that may go again (read-only; a PUT with the producer's own
  key), with several servers, is sent again to the primary found anew after a lost
  connection or a reply missing from a server that no longer answers or no longer may
  (the same check, FOLLOW_CHECK_S), until the client's timeout_s has passed (resends_until).
"""
from __future__ import annotations

from typing import Final

from queue_server.protocol.client_errors import ConnectionLost, OfflineError

# Between two tries while following: the sentinel promotes 1.25-1.5 s after a kill, so a
# client polls the server list about eight times before the new primary answers.
FOLLOW_RETRY_S: Final = 0.2
# How long a request that follows the primary waits for its reply before it asks its
# server for ROLE on a new connection (wait_check.py held_reply), answered at once by a
# live server. A primary whose replies may still go out (its lease held, or unmanaged)
# holds this one (sync mode, for its replicas): it is waited for on the same connection,
# asked again this often, until `until`. A server that leaves ROLE unanswered for
# connect_timeout_s (3 s) is frozen, and one that says it will not send the reply (a
# replica; a primary whose lease lapsed, cut off from the manager, which promotes another)
# is left too: the request goes to the primary found anew. A frozen primary (SIGSTOP, a
# paused VM) still takes the request into its socket and never answers: a DONE sent to it
# reaches the new primary after this, ROLE (3 s) and the reconnect's handshake with the
# frozen server (connect_timeout_s, core.py), about 8 s (with the client's 30 s for the
# reply and the handshake: 60 s, past a 60 s lock, so the job ran again). Before, the reply
# was given up after a fixed 5 s whatever held it: with sync_timeout_s 8 s, or a silent
# replica under `sync_fallback = "refuse"` (replies held until one confirms), the request
# went again to the same live primary, and a handler's reply PUT was stored twice. 2 s: a
# live primary answers an outcome in milliseconds, or holds it sync_timeout_s (2 s by
# default) for silent replicas; one short connection per late reply and 2 s is cheap.
# A read or a keyed PUT without `until` (resends_until) is checked the same way: a keyed
# PUT sent again meets its key, but a primary refusing in sync mode would answer the
# second send `500 Offline Mode` while it holds the first.
FOLLOW_CHECK_S: Final = 2.0
# What a request given up on a silent server still reads: a reply sent during the check.
FOLLOW_TAIL_S: Final = 0.05
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
    producer's own key) is sent again to the primary found anew when its server is silent
    or no longer primary (FOLLOW_CHECK_S, wait_check.py held_reply), and its live
    primary's late reply waited for: the client's `timeout_s` from `now`; None (one reply
    wait of `timeout_s`) with a single server or a timeout_s that short. Before, a
    producer's PUT sent to a frozen primary waited the client's 30 s and raised
    ReplyTimeout, the replica promoted 2 s after the freeze."""
    if servers == 1 or timeout_s <= FOLLOW_CHECK_S:
        return None
    return now + timeout_s


def resend_pause(exc: BaseException, until: float, now: float) -> float | None:
    """0 (no pause: the new connection asks the server list) when a request's reply did
    not come from a silent server (resends_until) and `until` is not past; None to raise."""
    if now >= until or not isinstance(exc, TimeoutError):
        return None
    return 0.0
