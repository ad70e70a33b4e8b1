"""Heartbeats on the replication link, both ways: the liveness rule of seeds/002 (Paranoid
Pirate), which masters and the manager already follow.

Each side sends something at least every HEARTBEAT_S (the primary an empty line when it
streamed nothing, the replica its `REPLACK`); a side that heard nothing for LIVENESS
intervals counts the other as dead and closes the link, whatever TCP says: a frozen
primary (a VM pause, a stalled disk, SIGSTOP) or a partition that leaves the connection
open is noticed in LIVENESS x HEARTBEAT_S seconds instead of when the socket closes,
which under a partition may be hours. Pure values and arithmetic: no I/O here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

HEARTBEAT_S = 0.5
LIVENESS = 3
SILENCE_LIMIT_S = HEARTBEAT_S * LIVENESS
HEARTBEAT_LINE = b"\r\n"  # an empty line: every replica skips it (replay.py `_take_record`)


@dataclass(slots=True)
class Heard:
    """When the other side was last heard from (monotonic seconds)."""

    at: float

    def silent_for(self, now: float) -> float:
        return now - self.at

    def dead(self, now: float, limit_s: float = SILENCE_LIMIT_S) -> bool:
        return now - self.at >= limit_s


class Upstream(Protocol):
    """A replica's link to its primary, told of each local commit (follower.py): what was
    applied before it is now written here, under this server's fsync policy."""

    def committed(self) -> None: ...

    def position(self) -> int: ...  # records of the primary's history applied here
