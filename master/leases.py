"""The master's side of its slots' leases: one pipe per slot (read here), and which locks are
due for renewal (pure). Why the master renews, and why pipes: slot/leases.py."""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from master.lifecycle import ALIVE, Leased, LoopStarted, Resolved, Slot, SlotState
from master.start_failures import SetupFailed
from slot.beacon import LeaseNote
from slot.done_map import DoneMap
from slot.errors import MessageError
from slot.outcome_notes import STARTED, is_outcome_line
from slot.setup_notes import is_setup_error_line, parse_setup_error

log = logging.getLogger(__name__)

# A note names every job of a batch (about 25 bytes each): 4 MiB is a batch of 150,000.
MAX_NOTE_BYTES = 4 * 1024 * 1024
READ_BYTES = 65536
# Renew three times per lock: two renewals may fail (queue server busy or failing over)
# before the lock runs out.
RENEWALS_PER_LOCK = 3
# Slots whose batch is renewed: not those the master has killed (STOPPING).
RENEWED_STATES = ALIVE - {SlotState.STOPPING}


@dataclass(frozen=True, slots=True)
class Note:
    slot_id: int
    # None for outcome, start and setup-error notes: they name no pid, the pipe is the
    # slot's own (a new one per fork).
    pid: int | None
    event: Leased | LoopStarted | Resolved | SetupFailed


class LeasePipes:
    """One pipe per slot: the slot writes LeaseNotes (JSON lines), the master reads them
    without blocking, every tick and just before it handles a reaped slot."""

    def __init__(self) -> None:
        self._read_fds: dict[int, int] = {}
        self._buffers: dict[int, bytearray] = {}
        # Each slot's DONE bits, shared with it (slot/done_map.py).
        self._done_maps: dict[int, DoneMap] = {}

    def open(self, slot_id: int) -> int:
        """A new pipe for `slot_id` (closing its predecessor's); returns the write end for the
        child, which the master closes after the fork (close_after_fork)."""
        self.close(slot_id)
        # The default 64 KiB buffer holds about 200 notes of 10 jobs; the master reads every
        # tick (50 ms). A bigger F_SETPIPE_SZ per slot would count against the user's
        # pipe-user-pages-soft, past which every new pipe of the user gets 8 KiB.
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(read_fd, False)
        self._read_fds[slot_id] = read_fd
        self._buffers[slot_id] = bytearray()
        self._done_maps[slot_id] = DoneMap()
        return write_fd

    def done_map(self, slot_id: int) -> DoneMap | None:
        """The DONE bits shared with the slot forked after open(slot_id)."""
        return self._done_maps.get(slot_id)

    def batch_page(self, slot_id: int, jobs: int) -> tuple[int | None, list[int]]:
        """Read after the slot died: the id of the job it was running (or NOT_STARTED,
        HANDLED; None without a page), and the positions of the jobs it marked DONE."""
        done_map = self._done_maps.get(slot_id)
        if done_map is None:
            return None, []
        return int(done_map.running[0]), done_map.marked(jobs)

    def inherited_fds(self) -> tuple[int, ...]:
        """The read ends a forked slot must close (every slot's, its own included)."""
        return tuple(self._read_fds.values())

    def read(self) -> Iterator[Note]:
        """Every complete note waiting in any pipe."""
        for slot_id in list(self._read_fds):
            yield from self.read_slot(slot_id)

    def read_slot(self, slot_id: int) -> Iterator[Note]:
        fd = self._read_fds.get(slot_id)
        if fd is None:
            return
        buffer = self._buffers[slot_id]
        while True:
            try:
                chunk = os.read(fd, READ_BYTES)
            except BlockingIOError:
                break
            if not chunk:  # the slot is gone and its notes are all read
                break
            buffer += chunk
            if len(buffer) > MAX_NOTE_BYTES and b"\n" not in buffer:
                log.warning("slot %d: a lease note over %d bytes; dropped (its batch is not renewed "
                            "and comes back after its lock time if the slot dies)", slot_id, MAX_NOTE_BYTES)
                buffer.clear()
        yield from _notes(slot_id, buffer)

    def close(self, slot_id: int) -> None:
        fd = self._read_fds.pop(slot_id, None)
        self._buffers.pop(slot_id, None)
        if fd is not None:
            os.close(fd)
        done_map = self._done_maps.pop(slot_id, None)
        if done_map is not None:
            done_map.close()

    def close_all(self) -> None:
        for slot_id in list(self._read_fds):
            self.close(slot_id)


def _notes(slot_id: int, buffer: bytearray) -> Iterator[Note]:
    end = buffer.rfind(b"\n")
    if end < 0:
        return
    lines = bytes(buffer[:end]).split(b"\n")
    del buffer[: end + 1]
    for line in lines:
        if is_setup_error_line(line):
            try:
                yield Note(slot_id, None, SetupFailed(parse_setup_error(line)))
            except ValueError as exc:
                log.warning("slot %d: dropping a setup-error note: %s", slot_id, exc)
            continue
        if is_outcome_line(line):
            # Kept raw: parsed only if the slot dies holding its batch (master/settle.py).
            event = LoopStarted() if line == STARTED[:-1] else Resolved(line)
            yield Note(slot_id, None, event)
            continue
        try:
            note = LeaseNote.decode(line)
        except MessageError as exc:
            log.warning("slot %d: dropping a lease note: %s", slot_id, exc)
            continue
        yield Note(note.slot_id, note.pid, Leased(tuple(note.jobs), note.lock_s, tuple(note.keys),
                                                           note.in_order))


def renewals(slots: Iterable[Slot], now: float) -> list[int]:
    """The lease ids whose lock is due for renewal (a third of the lock since the last one);
    marks them renewed now."""
    due: list[int] = []
    for slot in slots:
        lease = slot.lease
        if lease is None or slot.state not in RENEWED_STATES:
            continue
        if now - lease.renewed_at >= lease.lock_s / RENEWALS_PER_LOCK:
            due.extend(job_id for job_id, _ in lease.jobs)
            slot.lease = replace(lease, renewed_at=now)
    return due
