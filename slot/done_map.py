"""The state of a slot's batch in a page of memory shared with its master: which job runs
now, whether handle() has returned, and which jobs the handler marked DONE.

Why not outcome notes (slot/outcome_notes.py) for these: they are written for nearly every
job, and a write(2) per job, or even a few Python calls per job, cost the all-good path
15-25% (A/B against main, bench/crashes.py --base: the slot's own work is about 13 µs a job
at batch 100). A store into a shared page costs no system call and, like a write that
returned, survives the slot's death: the master reads the page of the batch it holds when
it reaps the slot. Layout: one signed 64-bit word (the job running: its lease id, or
NOT_STARTED before handle(), or HANDLED once handle() returned), then one DONE bit per job
of the batch, in the order of the hold note. The slot resets the page before it writes
that note.
"""
from __future__ import annotations

import mmap

# Jobs a batch can mark here; jobs past this (a batch bigger than 65,536) are noted on the pipe.
CAPACITY = 65_536
HEADER = 8
NOT_STARTED = -1
HANDLED = -2


class DoneMap:
    def __init__(self) -> None:
        # Anonymous and shared: the forked slot and its master see the same page.
        self._map = mmap.mmap(-1, HEADER + CAPACITY // 8, flags=mmap.MAP_SHARED)
        # The slot's handle() loop stores the running job's id here: one store, no call.
        self.running = memoryview(self._map)[:HEADER].cast("q")

    def reset(self, jobs: int) -> None:
        self.running[0] = NOT_STARTED
        size = (min(jobs, CAPACITY) + 7) // 8
        self._map[HEADER:HEADER + size] = bytes(size)

    def mark(self, index: int) -> bool:
        """Mark job `index` DONE; False when it is past the capacity (note it instead)."""
        if index >= CAPACITY:
            return False
        self._map[HEADER + (index >> 3)] |= 1 << (index & 7)
        return True

    def marked(self, jobs: int) -> list[int]:
        """The indexes below `jobs` marked DONE."""
        count = min(jobs, CAPACITY)
        bits = self._map[HEADER:HEADER + (count + 7) // 8]
        return [i for i in range(count) if bits[i >> 3] >> (i & 7) & 1]

    def close(self) -> None:
        self.running.release()
        self._map.close()
