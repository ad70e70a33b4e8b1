"""Paranoid Pirate, manager side (pure, clock passed in): which masters are alive, and when.

A master is alive while its reports keep coming: one missing for `liveness` heartbeat
intervals means it is lost (its slots are re-planned onto live hosts). A report from a
lost host, or from a new master pid on a known host, means the manager must rebuild its
view of that host from the slots the report lists.

A host is bound to the connection (ZeroMQ routing id) it reported on: while it is alive,
a report naming it from another connection is a spoof unless that connection is gone
(a restarted or reconnected master); `bound_elsewhere` says which case needs that check.

Silence counts only while the manager listens. A manager that stalled (its process frozen
or starved, a plan that ran long) finds the masters' frames of that time still in the
kernel, not yet taken by ZeroMQ's I/O thread: counted as silence, every master was lost,
came back on its stale frames, and was lost again while it reconnected (two `master_lost`
for one host, and two re-plans). `listened` excuses such a stall.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum, auto


class MasterState(StrEnum):
    ALIVE = auto()
    # Silent for liveness intervals, or said goodbye; its slots no longer count.
    LOST = auto()


ALLOWED: dict[MasterState, frozenset[MasterState]] = {
    MasterState.ALIVE: frozenset({MasterState.LOST}),
    MasterState.LOST: frozenset({MasterState.ALIVE}),
}


class TransitionError(Exception):
    def __init__(self, host: str, current: MasterState, wanted: MasterState) -> None:
        super().__init__(f"master {host}: cannot move from {current} to {wanted}")


class Change(StrEnum):
    JOINED = auto()  # first report from this host since the manager became active
    BACK = auto()  # a lost host reports again
    RESTARTED = auto()  # an alive host reports with a new master pid (its slots were re-forked)
    LOST = auto()  # silent for liveness intervals
    LEFT = auto()  # said goodbye (stopping)


# Changes after which the manager rebuilds the host's slots from its report.
ADOPT = frozenset({Change.JOINED, Change.BACK, Change.RESTARTED})
GONE = frozenset({Change.LOST, Change.LEFT})


@dataclass(frozen=True, slots=True)
class PeerChange:
    host: str
    change: Change
    silent_s: float = 0.0


@dataclass(slots=True)
class Peer:
    """One master as the manager sees it. Only Peers changes `state`."""

    host: str
    routing_id: bytes
    master_pid: int
    state: MasterState
    last_heard_at: float


class Peers:
    def __init__(self, *, interval_s: float, liveness: int) -> None:
        self.interval_s = interval_s
        self.liveness = liveness
        self._peers: dict[str, Peer] = {}
        self._listened_at: float | None = None

    @property
    def timeout_s(self) -> float:
        return self.interval_s * self.liveness

    def on_report(
        self, host: str, *, routing_id: bytes, master_pid: int, now: float, leaving: bool = False
    ) -> PeerChange | None:
        """A report arrived from `host`; the change it means, if any."""
        peer = self._peers.get(host)
        if peer is None:
            if leaving:
                return None
            self._peers[host] = Peer(host, routing_id, master_pid, MasterState.ALIVE, now)
            return PeerChange(host, Change.JOINED)
        silent_s = now - peer.last_heard_at
        peer.last_heard_at = now
        peer.routing_id = routing_id
        if leaving:
            if peer.state is MasterState.ALIVE:
                _move(peer, MasterState.LOST)
                return PeerChange(host, Change.LEFT)
            return None
        restarted = peer.master_pid != master_pid
        peer.master_pid = master_pid
        if peer.state is MasterState.LOST:
            _move(peer, MasterState.ALIVE)
            return PeerChange(host, Change.BACK, silent_s)
        return PeerChange(host, Change.RESTARTED) if restarted else None

    def bound_elsewhere(self, host: str, routing_id: bytes) -> bytes | None:
        """The connection an alive `host` is bound to when a report comes from another one
        (None: the report may be taken: a new or lost host, or its own connection)."""
        peer = self._peers.get(host)
        if peer is None or peer.state is MasterState.LOST or peer.routing_id == routing_id:
            return None
        return peer.routing_id

    def listened(self, now: float) -> float:
        """The manager took its frames at `now`. Time since it last did, beyond one
        interval (the longest it waits), was its own stall: the alive masters' deadlines
        move by that much. Returns the stall excused (0.0 for none)."""
        previous, self._listened_at = self._listened_at, now
        if previous is None:
            return 0.0
        stall_s = now - previous - self.interval_s
        if stall_s <= 0.0:
            return 0.0
        for peer in self.alive():
            peer.last_heard_at += stall_s
        return stall_s

    def expire(self, now: float) -> list[PeerChange]:
        """Alive masters silent for liveness intervals become lost."""
        lost: list[PeerChange] = []
        for peer in self._peers.values():
            silent_s = now - peer.last_heard_at
            if peer.state is MasterState.ALIVE and silent_s >= self.timeout_s:
                _move(peer, MasterState.LOST)
                lost.append(PeerChange(peer.host, Change.LOST, silent_s))
        return lost

    def next_expiry(self) -> float:
        """When the next alive master would count as lost (inf with none alive)."""
        return min(
            (p.last_heard_at + self.timeout_s for p in self.alive()), default=float("inf")
        )

    def alive(self) -> Iterator[Peer]:
        return (p for p in self._peers.values() if p.state is MasterState.ALIVE)

    def get(self, host: str) -> Peer | None:
        return self._peers.get(host)

    def __len__(self) -> int:
        return len(self._peers)

    def lost_since(self, before: float) -> list[str]:
        """Lost hosts last heard before `before`, longest silent first."""
        lost = [p for p in self._peers.values()
                if p.state is MasterState.LOST and p.last_heard_at < before]
        return [p.host for p in sorted(lost, key=lambda p: p.last_heard_at)]

    def forget(self, host: str) -> None:
        """Drop a lost host for good: a report from it later is a join, not a return."""
        peer = self._peers.get(host)
        if peer is not None and peer.state is MasterState.LOST:
            del self._peers[host]

    def all(self) -> list[Peer]:
        return list(self._peers.values())


def _move(peer: Peer, wanted: MasterState) -> None:
    if wanted not in ALLOWED[peer.state]:
        raise TransitionError(peer.host, peer.state, wanted)
    peer.state = wanted
