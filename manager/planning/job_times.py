"""Job times remembered past the stats window (pure): a cold queue's demand from its history.

A queue idle through the whole window has no job time in it, and a burst into it read as
"one slot to learn from" until a slot had finished a batch and a master had reported it
(issue 28: 4,000 jobs of 20 ms at 1 slot for 6.3 s). The last job time measured is kept
per queue (seeded at start from the history's newest measured sample) and handed to the
planner as `QueueStats.known_job_s` while the window shows no finished job; a burst plan
sizes a queue never measured on manager/planning/planner.py's ASSUMED_JOB_S, and the first batch
measured corrects either.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from manager.storage.model import QueueStats

# Queues remembered at most (the configured ones are far fewer; a bound for the memory only).
MAX_QUEUES = 100_000


class JobTimeMemory:
    """The last job time measured per queue (busy seconds per job over a window)."""

    def __init__(self) -> None:
        self.last_s: dict[str, float] = {}

    def seed(self, job_times_s: Mapping[str, float]) -> None:
        """Job times from before this process (the history table's last samples); a
        measurement of this process wins."""
        for queue, job_s in job_times_s.items():
            if queue not in self.last_s and _usable(job_s) and len(self.last_s) < MAX_QUEUES:
                self.last_s[queue] = job_s

    def fill(self, stats: Mapping[str, QueueStats]) -> dict[str, QueueStats]:
        """Remember the job times the window measures; give each queue whose window shows no
        finished job the one remembered (if any)."""
        filled: dict[str, QueueStats] = {}
        for queue, figures in stats.items():
            if figures.jobs_done > 0:
                job_s = figures.busy_s / figures.jobs_done
                if _usable(job_s) and (queue in self.last_s or len(self.last_s) < MAX_QUEUES):
                    self.last_s[queue] = job_s
                filled[queue] = figures
            elif queue in self.last_s:
                filled[queue] = replace(figures, known_job_s=self.last_s[queue])
            else:
                filled[queue] = figures
        return filled


def _usable(job_s: float) -> bool:
    return isinstance(job_s, float | int) and 0 < job_s < float("inf")
