"""A slot whose master died keeps its batch's locks alive while it finishes, for a bounded time.

The master renews its slots' locks (slot/leases.py says why). Seen with the master killed
-9 while its slot ran a 12 s job under lock_timeout_s 3: nobody renewed the lock, it expired
3 s later and counted as a failed attempt ("lock expired after 3 s"), the job went back to the
queue while the orphan still ran it, and the orphan's DONE was refused at the end: the work
thrown away, an attempt charged that never failed, and the job run again (with the master
restarted by systemd, twice at once). So the orphan, which stops after the job it runs as on
a graceful stop (slot/process.py), renews its own locks meanwhile, from a thread and
connection of its own, for as long as a graceful stop lets a job finish (the master's
stop_timeout_s). Then it lets them lapse: an orphan stuck in its handler cannot hold its jobs
for ever, and they come back lock_timeout_s later, as before.
"""
from __future__ import annotations

import _thread
import logging
import time
from collections.abc import Callable, Sequence

from queue_server.client import QueueClient
from slot.wake import block_slot_signals_in_this_thread

log = logging.getLogger(__name__)

# How often within a lock time the locks are renewed: a renewal lost to a busy moment still
# leaves two more before the lock runs out.
RENEWALS_PER_LOCK = 3
# How soon a batch taken while orphaned (none is: the slot stops) or an empty hand is looked at again.
IDLE_CHECK_S = 0.2


class OrphanRenewal:
    def __init__(self, make_client: Callable[[], QueueClient],
                 held: Callable[[], tuple[Sequence[int], float]], *, timeout_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`held()`: the lease ids of the batch the slot holds now (none between batches)
        and their lock time; `timeout_s`: how long to renew them."""
        self.make_client = make_client
        self.held = held
        self.timeout_s = timeout_s
        self.clock = clock
        self.renewed = 0

    def start(self) -> None:
        _thread.start_new_thread(self._main, ())

    def _main(self) -> None:
        block_slot_signals_in_this_thread()
        deadline = self.clock() + self.timeout_s
        client = self.make_client()
        try:
            while self.clock() < deadline:
                ids, lock_s = self.held()
                if ids:
                    self._renew(client, ids)
                wait_s = lock_s / RENEWALS_PER_LOCK if ids else IDLE_CHECK_S
                time.sleep(max(0.0, min(wait_s, deadline - self.clock())))
        finally:
            client.close()
        ids, lock_s = self.held()
        if ids:
            log.warning("orphaned slot: %d locks renewed for %g s (stop_timeout_s) and left to lapse "
                        "now; its batch comes back %g s after the last renewal unless it finishes first",
                        len(ids), self.timeout_s, lock_s)

    def _renew(self, client: QueueClient, ids: Sequence[int]) -> None:
        try:
            client.touch(*ids)
        except Exception:  # a thread's boundary: one failed renewal must not end the others
            log.warning("orphaned slot: cannot renew the locks of %d jobs; trying again in a "
                        "third of their lock time", len(ids), exc_info=True)
            return
        self.renewed += 1
