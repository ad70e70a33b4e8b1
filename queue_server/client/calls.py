"""Synchronous calls (PUT ... NEW WAIT), the decisions both clients share: the reply queue
convention, the request, and the waits a caller gave up on.

- The reply queue is `<queue>_reply` unless named: the handler side (slot.handler's
  `Handler.output_queue()`) uses the same rule, so nobody writes the name twice.
- The reply is handed out with `EXPIRE 0 THEN DONE`: the server deletes it on its next
  expiry pass, so no reply job stays running after a call (it used to stay until someone
  sent DONE, and nobody did).
- A caller that gives up (timeout_s) keeps its connection open, unread, for `late_reply_s`
  (at most MAX_ABANDONED of them per client): a reply that comes meanwhile is still handed
  to that connection, with EXPIRE 0 THEN DONE, and so deleted instead of staying in the
  reply queue forever. Past `late_reply_s`, or when the client closes, the connection is
  closed and a reply that comes even later stays in the reply queue.
- A call that times out says why, as far as the queue server can tell (`why_no_reply`): it
  asks for the call's job by key (the request has `KEY *`) and for the queue's STATS, on a
  fresh connection, then says whether the job still waits with nothing serving the queue
  (a typo, a queue no config names, no master with its handler), waits behind busy slots,
  runs still, failed (with the error's last line), or was taken and finished without a reply.
- The PUT's acknowledgement is waited for at most max(timeout_s, ACK_LEAST_S) (within the
  client's timeout_s): a frozen server never sends it (`ack_timeout_s`).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from queue_server.client.tracing import INSTALLED as TRACING
from queue_server.client.tracing import current_traceparent
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import ReplyTimeout
from queue_server.protocol.job_info import JobInfo, error_summary
from queue_server.protocol.replies import QueueStats
from queue_server.protocol.requests import Address, Then

REPLY_SUFFIX: Final = "_reply"
# How long a connection whose caller gave up keeps waiting for the late reply.
LATE_REPLY_S: Final = 60.0
MAX_ABANDONED: Final = 16
# The least a call waits for its PUT's acknowledgement (ack_timeout_s), whatever its own
# timeout_s: a live primary acknowledges at once, or after holding it sync_timeout_s (2 s
# by default) for its replicas. A call is never sent again (a new item), so one held longer
# (`sync_fallback = "refuse"` with a silent replica, a late consent) raises ReplyTimeout,
# its job stored; a frozen primary never acknowledges.
ACK_LEAST_S: Final = 5.0

C = TypeVar("C")


def reply_queue(queue: str) -> str:
    """The queue a handler of `queue` replies to: `<queue>_reply`."""
    return queue + REPLY_SUFFIX


def ack_timeout_s(client_timeout_s: float, timeout_s: float | None) -> float:
    """How long a call waits for its PUT's acknowledgement: the client's timeout_s, but no
    longer than the call's own `timeout_s` once that covers a live primary's hold
    (ACK_LEAST_S: at once, or after sync_timeout_s for its replicas). A frozen primary
    (SIGSTOP, a paused VM) never acknowledges: a call(timeout_s=2) raised ReplyTimeout after
    the client's 30 s; now after 5 s."""
    if timeout_s is None:
        return client_timeout_s
    return min(client_timeout_s, max(timeout_s, ACK_LEAST_S))


def call_request(
    queue: str,
    data: bytes | str,
    *,
    output_queue: str | None,
    priority: int,
    expire_s: float | None,
    then: Then | None,
) -> bytes:
    """`PUT <q> <p> <len> NEW WAIT <oq> EXPIRE <s> THEN DONE`: by default the reply is
    acknowledged by the server itself (EXPIRE 0 THEN DONE)."""
    if expire_s is None:
        expire_s, then = 0, "done"
    return req.put_request(
        queue, data, priority_=priority, new_item=True,
        wait_queue=output_queue if output_queue is not None else reply_queue(queue),
        expire_s=expire_s, then=then, keyed=True,
        trace=current_traceparent() if TRACING else None,  # the caller's span, if any
    )


def reply_timeout(address: Address, timeout_s: float | None, late_reply_s: float,
                  why: str | None = None) -> ReplyTimeout:
    """What a caller that gave up is told; `why`: what the server says of the job (why_no_reply)."""
    server = req.format_address(address)
    reason = f": {why}" if why else ""
    return ReplyTimeout(f"no reply to PUT ... WAIT from {server} within {timeout_s} s{reason}; "
                        f"a reply within {late_reply_s:.0f} s more is deleted")


def why_no_reply(queue: str, output_queue: str, info: JobInfo | None, stats: QueueStats | None,
                 *, timeout_s: float | None) -> str:
    """Pure: what the call's job and its queue's STATS say about a missing reply."""
    if info is None or info.state == "done":
        by = f" by {info.ran_by}" if info is not None and info.ran_by else ""
        return (f"the job was taken and finished{by} (or deleted) without a reply to "
                f"{output_queue!r}: does its handler call job.reply()?")
    if info.state == "ready":
        return _still_waiting(queue, stats)
    if info.state == "running":
        return (f"a slot is running the job (attempt {info.attempts}): its handler takes longer "
                f"than {timeout_s} s")
    error = error_summary(info.error) or "no error text"
    if info.state == "failed":
        when = time.strftime("%H:%M:%S UTC", time.gmtime(info.next_run_at)) if info.next_run_at else "later"
        return f"its handler failed (attempt {info.attempts}: {error}); it runs again at {when}"
    if info.state == "dead":
        return f"its handler failed and the job is dead after {info.attempts} attempts ({error})"
    return f"the job is {info.state} until {info.next_run_at}"


def _still_waiting(queue: str, stats: QueueStats | None) -> str:
    """A job still ready after the whole timeout, with none of its queue's jobs running:
    a slot of the queue, idle or done with its batch, would have taken it by then."""
    if stats is not None and stats.running == 0:
        unnamed = " and no config names it" if stats.configured is False else ""
        return (f"nothing took the job: no slot serves queue {queue!r} (none of its jobs "
                f"runs{unnamed}); check the queue's name, and that a master runs its handler")
    ahead = f" behind {stats.ready - 1} ready jobs" if stats is not None and stats.ready > 1 else ""
    return f"the job still waits in {queue!r}{ahead}: the queue's slots are busy"


@dataclass(frozen=True, slots=True)
class Abandoned(Generic[C]):
    conn: C
    # time.monotonic() after which the connection is closed, reply or not.
    until: float


class AbandonedWaits(Generic[C]):
    """Connections whose caller gave up on its reply, oldest first (pure: the caller closes
    what these methods hand back)."""

    def __init__(self, limit: int = MAX_ABANDONED) -> None:
        self.limit = limit
        self._waits: deque[Abandoned[C]] = deque()

    def __len__(self) -> int:
        return len(self._waits)

    def add(self, conn: C, *, until: float) -> list[C]:
        """Keep `conn` until `until`; the connections pushed out by the limit, to close."""
        self._waits.append(Abandoned(conn, until))
        pushed: list[C] = []
        while len(self._waits) > self.limit:
            pushed.append(self._waits.popleft().conn)
        return pushed

    def due(self, now: float, answered: frozenset[int] | set[int] = frozenset()) -> list[C]:
        """The connections to close now: past their time, or answered (`id(conn)` in `answered`:
        the late reply came, and the server deletes it)."""
        keep: deque[Abandoned[C]] = deque()
        done: list[C] = []
        for wait in self._waits:
            if wait.until <= now or id(wait.conn) in answered:
                done.append(wait.conn)
            else:
                keep.append(wait)
        self._waits = keep
        return done

    def conns(self) -> list[C]:
        return [wait.conn for wait in self._waits]

    def take_all(self) -> list[C]:
        conns = self.conns()
        self._waits.clear()
        return conns
