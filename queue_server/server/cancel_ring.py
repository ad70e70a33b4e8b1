"""The primary's recent cancels (CANCEL), for CANCELLED readers: a bounded ring with a
position, in memory only; no I/O.

Why a ring read by polling, and not a push: a slot running a cancelled job is stopped by
its master, the only process that knows which slot holds which lease id (master/leases.py).
Masters already talk to the primary on every renewal round, so each one asks "anything
cancelled after position n?" twice a second while its slots hold jobs (one small request;
the answer is empty nearly always). Sidekiq does the same for its cancellable jobs (a
cancelled flag each job checks in Redis); Celery's revoke broadcasts to every worker,
which keeps an in-memory revoked set, lost with the worker, as this ring is lost with
the primary (docs/DESIGN.md "Cancel": the job is dead in the journal already; only the
stop of its slot is late or missing, and its DONE is refused).

A ring id changes with every server start, so a reader that knew another ring (a restart,
a failover) reads the new ring from its start. Its size bounds memory (RING_SIZE x ~200
bytes); a reader more than RING_SIZE cancels behind is told how many it missed.
"""
from __future__ import annotations

import secrets
from collections import deque
from dataclasses import dataclass, field
from itertools import islice

from queue_server.protocol.cancels import NO_RING

# Cancels the ring holds: readers poll every 0.5-1 s, so this covers bursts of thousands of
# cancels per second (a bulk cancel through a script) without a reader missing one.
RING_SIZE = 4096


@dataclass(frozen=True, slots=True)
class Cancelled:
    seq: int
    lease: int  # the running job's lease id; 0: it was not running (waiting, delayed or dead) and was removed
    queue: str
    key: str
    door: str
    at: float

    def as_json(self) -> dict[str, object]:
        return {"seq": self.seq, "lease": self.lease, "queue": self.queue, "key": self.key,
                "door": self.door, "at": self.at}


@dataclass(slots=True)
class CancelRing:
    size: int = RING_SIZE
    ring: str = field(default_factory=lambda: secrets.token_hex(8))
    last: int = 0
    entries: deque[Cancelled] = field(default_factory=deque)

    def add(self, *, lease: int, queue: str, key: str, door: str, at: float) -> Cancelled:
        self.last += 1
        entry = Cancelled(self.last, lease, queue, key, door, at)
        self.entries.append(entry)
        if len(self.entries) > self.size:
            self.entries.popleft()
        return entry

    def page(self, ring: str, since: int) -> dict[str, object]:
        """The CANCELLED reply's document: the cancels after `since` of `ring` (all held, when
        `ring` is another ring or none), and how many of those the ring no longer holds."""
        if ring != self.ring or ring == NO_RING or since > self.last:
            since = 0
        first = self.entries[0].seq if self.entries else self.last + 1
        missed = max(0, first - since - 1)
        # Newest at the right: skip from the left only as far as needed.
        start = max(0, since - first + 1)
        cancels = [entry.as_json() for entry in islice(self.entries, start, None)]
        return {"ring": self.ring, "last": self.last, "missed": missed, "cancels": cancels}
