"""Group commit's short wait for the cohort (fsync always).

After an fsync the server answers a group of connections at once; most clients send
their next request right away, but one client process answers its sockets one after
another, so the requests come back spread over tens of microseconds. Syncing as soon
as the first of them is read splits the clients into two alternating half groups,
each paying a whole fsync. Waiting a little (at most one fsync time, from the first
record of the group) for the ones still on their way makes one group of them: a
straggler left out would wait for a whole extra fsync anyway. Measured with 16
connections from one process: 33,000 -> 43,000 acknowledged PUT/s (bench/RESULTS.md).

Only connections that came back quickly last time are waited for: a client that
thinks between requests, or a blocked GETB, stops costing the others a wait after
its first slow return. The same idea as MySQL's binlog_group_commit_sync_delay and
PostgreSQL's commit_delay, sized from the measured fsync instead of a setting.
"""
from __future__ import annotations

import select
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# select() takes descriptors below FD_SETSIZE; connections above it are not waited for.
FD_SETSIZE = 1024
MAX_WAIT_S = 0.001
FSYNC_EWMA_WEIGHT = 0.1
# A member is waited for if it came back within two fsync times of its answer.
QUICK_FSYNCS = 2.0


class Member(Protocol):
    fd: int
    requested: bool  # sent something since it was answered
    quick: bool  # came back within QUICK_FSYNCS fsync times last time
    answered_at: float

    @property
    def closing(self) -> bool: ...  # reads no more requests


@dataclass
class Cohort:
    """The connections answered by the last group commit, and the wait for them."""
    fsync_s: float = 0.0  # moving average of the fsync time
    members: Sequence[Member] = ()
    deadline: float = 0.0  # of the wait in progress; 0: none

    @property
    def max_wait_s(self) -> float:
        """Zero until the first fsync was measured: no waiting on a guess."""
        return min(self.fsync_s, MAX_WAIT_S)

    def synced(self, seconds: float) -> None:
        self.fsync_s += (seconds - self.fsync_s) * FSYNC_EWMA_WEIGHT if self.fsync_s else seconds

    def answered(self, members: Sequence[Member], now: float) -> None:
        for member in members:
            member.requested = False
            member.answered_at = now
        self.members = members

    def arrived(self, member: Member, now: float) -> None:
        if not member.requested:
            member.requested = True
            member.quick = now - member.answered_at <= QUICK_FSYNCS * self.fsync_s

    def missing_fds(self) -> list[int]:
        return [member.fd for member in self.members
                if member.quick and not member.requested and not member.closing
                and 0 <= member.fd < FD_SETSIZE]

    def wait(self) -> bool:
        """Before a sync: True when a missing member's request has just become readable
        (read it, then try again); False when the sync should go ahead."""
        missing = self.missing_fds()
        if not missing:
            self.deadline = 0.0
            return False
        now = time.perf_counter()
        if not self.deadline:
            self.deadline = now + self.max_wait_s
        if now >= self.deadline:
            self.deadline = 0.0
            return False
        try:
            readable, _, _ = select.select(missing, [], [], self.deadline - now)
        except (OSError, ValueError):
            # A member's socket was closed after its last read (its connection_lost
            # has not run yet): nothing to wait for there, and the sync must not wait.
            readable = []
        if not readable:
            self.deadline = 0.0
        return bool(readable)
