"""The slot's lease notes: before a batch runs, the ids it holds go to the master over a pipe.

Why the master keeps the leases, not a renewal thread in the slot:
- the master must know a slot's in-flight ids anyway, to fail them at once when the slot
  dies; with them it can renew too, and renewal then follows the master's own verdict on
  the slot (beacons, batch_timeout_s, reaping): a slot it kills is renewed no more;
- one connection and one TOUCH per host and period for all its slots, instead of one more
  connection and thread per slot (3,500 slots in the seed's cluster);
- a slot stuck in Python would keep a renewal thread of its own going forever.
Only an orphan, whose master died, renews its own, for a bounded time (slot/orphan.py).
Why a pipe, not the ZeroMQ beacon link: a write(2) that returned is in the kernel, so the
master reads it even if the slot os._exit()s or is SIGKILLed the next instant; a ZeroMQ
send is only queued for an I/O thread that dies with the process. The slot never waits
for an answer, so this costs a write per batch start and end, not a round trip.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from slot.beacon import LeaseNote
from slot.done_map import HANDLED, DoneMap
from slot.handler import Outcome, SlotJob
from slot.outcome_notes import (
    STARTED,
    done_note,
    fail_note,
    given_back_notes,
    later_note,
    reply_note,
)
from slot.setup_notes import SetupError, setup_error_note

log = logging.getLogger(__name__)


class LeaseReporter:
    """Writes this slot's LeaseNotes, one JSON line each, to its pipe to the master.

    The pipe is blocking: a master that reads nothing for 64 KiB of notes (the pipe's
    buffer, about 100 batches of 10) holds the slot at its next batch; it reads every tick.
    """

    def __init__(self, fd: int, *, slot_id: int, pid: int, done_map: DoneMap | None = None) -> None:
        self.fd = fd
        self.done_map = done_map
        # The batch held, and job id -> its position (its DONE bit), made at the first job.done()
        self._batch: Sequence[SlotJob] = ()
        self._positions: dict[int, int] | None = None
        self.slot_id = slot_id
        self.pid = pid
        self._holding = False
        self._lock_s = 0.0
        self._broken = False
        self._released = LeaseNote.encode_held(slot_id, pid, 0.0, ()) + b"\n"

    def hold(self, jobs: Sequence[SlotJob], *, lock_s: float, in_order: bool = False) -> None:
        held = [(job.id, job.attempt) for job in jobs]
        keys = [job.key for job in jobs]
        if self.done_map is not None:
            # Reset before the note: the master reads the page only for the batch it holds.
            self.done_map.reset(len(jobs))
        self._batch = jobs
        self._lock_s = lock_s
        self._positions = None
        self._write(LeaseNote.encode_held(self.slot_id, self.pid, lock_s, held, keys, in_order) + b"\n")
        self._holding = True

    def held(self) -> tuple[tuple[int, ...], float]:
        """The lease ids of the batch held now (none between batches) and their lock time;
        read by an orphaned slot's renewal thread (slot/orphan.py)."""
        if not self._holding:
            return (), self._lock_s
        return tuple(job.id for job in self._batch), self._lock_s

    def release(self) -> None:
        if self._holding:
            self._holding = False
            self._write(self._released)

    def handled(self) -> None:
        """handle() returned: every job not resolved otherwise is DONE, even if the slot dies
        before its acknowledgement."""
        if self.done_map is not None:
            self.done_map.running[0] = HANDLED

    def given_back(self, jobs: Sequence[SlotJob]) -> None:
        """A retarget gave back these jobs, not started (slot/retarget.py): noted in one
        write, then handle_job's loop is over (the jobs it ran have all returned), so the
        page says HANDLED: a death from now on charges none of them. In this order: HANDLED
        before the notes would make the jobs given back DONE if the slot died in between."""
        self._write(given_back_notes([job.id for job in jobs]))
        if not self._broken:
            self.handled()

    def running_marker(self) -> memoryview | None:
        """Where the handle() loop stores the id of the job it runs (slot/done_map.py)."""
        return None if self.done_map is None else self.done_map.running

    def started(self) -> None:
        """The slot reached its job loop: a death from now on is not a failed start."""
        self._write(STARTED)

    def setup_failed(self, error: SetupError) -> None:
        """The handler's setup() raised: why, for the master's report (slot/setup_notes.py)."""
        self._write(setup_error_note(error))

    def resolved(self, job: SlotJob) -> None:
        """A job's outcome, the moment the handler decides it (slot/outcome_notes.py)."""
        if job.reply_data is not None and job.item is not None:
            line = reply_note(job.id, job.item, job.reply_data)
            if line is None:
                return
        elif job.outcome is Outcome.FAILED:
            line = fail_note(job.id, job.error or "failed", dead=job.give_up)
        elif job.outcome is Outcome.LATER:
            line = later_note(job.id, job.delay_s)
        else:
            if self._positions is None:
                self._positions = {held.id: i for i, held in enumerate(self._batch)}
            position = self._positions.get(job.id)
            if self.done_map is not None and position is not None and self.done_map.mark(position):
                return
            line = done_note(job.id)
        self._write(line)

    def _write(self, line: bytes) -> None:
        if self._broken:
            return
        data = memoryview(line)
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError as exc:  # the master is gone (EPIPE) or the pipe was closed
            self._broken = True
            log.warning("cannot tell the master this slot's leases (%s); its batches are not "
                        "renewed, and come back after their lock time if it dies", exc)
