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
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import ReplyTimeout
from queue_server.protocol.requests import Address, Then

REPLY_SUFFIX: Final = "_reply"
# How long a connection whose caller gave up keeps waiting for the late reply.
LATE_REPLY_S: Final = 60.0
MAX_ABANDONED: Final = 16

C = TypeVar("C")


def reply_queue(queue: str) -> str:
    """The queue a handler of `queue` replies to: `<queue>_reply`."""
    return queue + REPLY_SUFFIX


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
        expire_s=expire_s, then=then,
    )


def reply_timeout(address: Address, timeout_s: float | None, late_reply_s: float) -> ReplyTimeout:
    """What a caller that gave up is told."""
    server = req.format_address(address)
    return ReplyTimeout(f"no reply to PUT ... WAIT from {server} within {timeout_s} s; "
                        f"a reply within {late_reply_s:.0f} s more is deleted")


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
