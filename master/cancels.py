"""Which slot runs a cancelled job (pure): the lease ids the queue server cancelled
(CANCELLED, read by the lease keeper) against the leases the slots noted
(master/leases.py). The master then kills that slot (lifecycle.JobCancelled).

A cancel may be read before the master has read the slot's note of that batch (the slot
writes it right after its fetch; the master reads notes every tick): so a cancel that
matches no slot yet waits MATCH_FOR_S. Every master reads every cancel of the cluster;
those of other masters' slots never match and are dropped after that time, as are those
of batches that ended before the cancel was read.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from master.lifecycle import JobCancelled, Slot
from queue_server.client.cancels import CancelEntry

# Far longer than a tick and a note's way through the pipe; short enough that the cancels
# of other masters' slots cost little (one entry each, for this long).
MATCH_FOR_S = 10.0


@dataclass(slots=True)
class CancelWatch:
    # lease id -> (the cancel, when it was read: monotonic)
    waiting: dict[int, tuple[CancelEntry, float]] = field(default_factory=dict)

    def matched(self, cancels: Iterable[CancelEntry], slots: Iterable[Slot],
                now: float) -> list[tuple[Slot, JobCancelled]]:
        """The slots to kill for the cancels read so far, with their event."""
        for entry in cancels:
            self.waiting.pop(entry.lease, None)  # read again: to the end, in read order
            self.waiting[entry.lease] = (entry, now)
        if not self.waiting:
            return []
        found: list[tuple[Slot, JobCancelled]] = []
        for slot in slots:
            lease = slot.lease
            if lease is None:  # a STOPPING slot too: its settlement then leaves the job out
                continue
            for job_id, _ in lease.jobs:
                waiting = self.waiting.pop(job_id, None)
                if waiting is not None:
                    entry = waiting[0]
                    found.append((slot, JobCancelled(entry.lease, entry.key, entry.door)))
        # Oldest first (read order): a first read of a ring may bring thousands of old cancels,
        # and a tick looks only at those due.
        while self.waiting:
            lease_id = next(iter(self.waiting))
            if now - self.waiting[lease_id][1] <= MATCH_FOR_S:
                break
            del self.waiting[lease_id]
        return found
