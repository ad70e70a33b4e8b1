"""A process's real memory from /proc (PSS, Private_Dirty) and when a slot should look at its own."""
from __future__ import annotations

from dataclasses import dataclass

_KIB = 1024
_WANTED = {b"Rss": "rss", b"Pss": "pss", b"Private_Dirty": "private_dirty"}


@dataclass(frozen=True, slots=True)
class MemoryUsage:
    rss_bytes: int
    # Each page divided among the processes sharing it: sums to the host's real use.
    pss_bytes: int
    # Pages only this process has written: what a fresh fork would give back.
    private_dirty_bytes: int


def parse_smaps(text: bytes) -> MemoryUsage:
    """Sum Rss, Pss and Private_Dirty over a smaps or smaps_rollup file (values in kB)."""
    totals = {"rss": 0, "pss": 0, "private_dirty": 0}
    for line in text.splitlines():
        key, sep, rest = line.partition(b":")
        name = _WANTED.get(key)
        if name is None or not sep:
            continue
        fields = rest.split()
        if fields and fields[0].isdigit():
            totals[name] += int(fields[0]) * _KIB
    return MemoryUsage(totals["rss"], totals["pss"], totals["private_dirty"])


def read_memory(pid: int | None = None) -> MemoryUsage:
    """Memory of `pid` (this process when None). smaps_rollup (Linux 4.14+) is one cheap
    read; older kernels only have smaps, one block per mapping, which we sum."""
    base = f"/proc/{pid if pid is not None else 'self'}"
    try:
        with open(f"{base}/smaps_rollup", "rb") as file:
            return parse_smaps(file.read())
    except FileNotFoundError:
        # No rollup on this kernel (or the process is gone: then smaps raises the same).
        with open(f"{base}/smaps", "rb") as file:
            return parse_smaps(file.read())


@dataclass(slots=True)
class MemoryWatch:
    """Decides when the slot reads its memory: every `every_jobs` jobs or `every_s` seconds,
    whichever comes first. Reading smaps walks the page tables (about 11 ms for a 200 MB
    process), so never after every job. The loop and the beacon thread share one watch."""

    every_jobs: int = 1000
    every_s: float = 1.0
    _jobs_at_last: int = 0
    _time_at_last: float = float("-inf")

    def due(self, *, jobs_done: int, now: float) -> bool:
        return (
            jobs_done - self._jobs_at_last >= self.every_jobs
            or now - self._time_at_last >= self.every_s
        )

    def mark(self, *, jobs_done: int, now: float) -> None:
        self._jobs_at_last = jobs_done
        self._time_at_last = now
