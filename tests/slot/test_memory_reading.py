"""Reading PSS and Private_Dirty from /proc, and when a slot looks at its memory."""
from __future__ import annotations

import os

from slot.memory import MemoryWatch, parse_smaps, read_memory

ROLLUP = b"""55d0c6a8e000-7ffd2a1f1000 ---p 00000000 00:00 0                          [rollup]
Rss:              204800 kB
Pss:               51200 kB
Pss_Anon:          40000 kB
Pss_File:          11200 kB
Pss_Shmem:             0 kB
Shared_Clean:       2048 kB
Shared_Dirty:     200000 kB
Private_Clean:       100 kB
Private_Dirty:      2652 kB
"""

SMAPS = b"""55d0c6a8e000-55d0c6a8f000 r--p 00000000 fd:01 123 /usr/bin/python3
Size:                  4 kB
Rss:                   4 kB
Pss:                   2 kB
Private_Dirty:         0 kB
7f00-7f10 rw-p 00000000 00:00 0
Rss:                  64 kB
Pss:                  64 kB
Private_Dirty:        64 kB
"""


def test_rollup_figures_are_read_in_bytes_and_pss_subfields_ignored() -> None:
    usage = parse_smaps(ROLLUP)
    assert usage.rss_bytes == 204800 * 1024
    assert usage.pss_bytes == 51200 * 1024
    assert usage.private_dirty_bytes == 2652 * 1024


def test_full_smaps_is_summed_over_all_mappings() -> None:
    usage = parse_smaps(SMAPS)
    assert (usage.rss_bytes, usage.pss_bytes, usage.private_dirty_bytes) == (68 * 1024, 66 * 1024, 64 * 1024)


def test_own_memory_grows_by_what_this_process_writes() -> None:
    before = read_memory()
    block = bytearray(64 * 1024 * 1024)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    after = read_memory(os.getpid())
    assert after.private_dirty_bytes - before.private_dirty_bytes >= 60 * 1024 * 1024
    assert after.pss_bytes >= after.private_dirty_bytes
    del block


def test_memory_watch_is_due_every_n_jobs_or_every_t_seconds() -> None:
    watch = MemoryWatch(every_jobs=100, every_s=1.0)
    assert watch.due(jobs_done=0, now=0.0)
    watch.mark(jobs_done=0, now=0.0)
    assert not watch.due(jobs_done=99, now=0.5)
    assert watch.due(jobs_done=100, now=0.5)
    assert watch.due(jobs_done=10, now=1.0)
