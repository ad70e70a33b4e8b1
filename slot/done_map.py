"""The DONE of each job of a slot's batch as one bit in memory shared with its master.

Why not an outcome note (slot/outcome_notes.py) like the other outcomes: DONE is the outcome
of nearly every job, and a write(2) per job, on a pipe the master drains only every tick,
cost the all-good path 15-25% on a loaded 2-core machine (measured: bench/crashes.py
--base). A store into a shared page costs no system call and, like a write that returned,
survives the slot's death: the master reads the bits of the batch it holds when it reaps
the slot. Bit i is job i of the batch, in the order of the hold note; the slot clears the
batch's bits before it writes that note.
"""
from __future__ import annotations

import mmap

# Jobs a batch can mark here; jobs past this (a batch bigger than 65,536) are noted on the pipe.
CAPACITY = 65_536


class DoneMap:
    def __init__(self) -> None:
        # Anonymous and shared: the forked slot and its master see the same page.
        self._map = mmap.mmap(-1, CAPACITY // 8, flags=mmap.MAP_SHARED)

    def clear(self, jobs: int) -> None:
        size = (min(jobs, CAPACITY) + 7) // 8
        self._map[:size] = bytes(size)

    def mark(self, index: int) -> bool:
        """Mark job `index` DONE; False when it is past the capacity (note it instead)."""
        if index >= CAPACITY:
            return False
        self._map[index >> 3] |= 1 << (index & 7)
        return True

    def marked(self, jobs: int) -> list[int]:
        """The indexes below `jobs` marked DONE."""
        size = (min(jobs, CAPACITY) + 7) // 8
        bits = self._map[:size]
        return [i for i in range(min(jobs, CAPACITY)) if bits[i >> 3] >> (i & 7) & 1]

    def close(self) -> None:
        self._map.close()
