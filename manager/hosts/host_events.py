"""A master joining, coming back, restarting, going silent or leaving, as an event (pure)."""
from __future__ import annotations

from manager.hosts.heartbeat import Change, PeerChange
from manager.storage.store import EventKind, NewEvent
from master.report import HostReport


def change_event(change: PeerChange, report: HostReport | None) -> NewEvent:
    slots = len(report.slots) if report is not None else 0
    texts = {
        Change.JOINED: (EventKind.MASTER_JOINED, f"master {change.host} joined with {slots} slots"),
        Change.BACK: (EventKind.MASTER_BACK,
                      f"master {change.host} is back after {change.silent_s:.1f} s with {slots} slots"),
        Change.RESTARTED: (EventKind.MASTER_RESTARTED, f"master {change.host} restarted"),
        Change.LOST: (EventKind.MASTER_LOST,
                      f"master {change.host} silent for {change.silent_s:.1f} s: its slots are re-planned"),
        Change.LEFT: (EventKind.MASTER_LEFT, f"master {change.host} is stopping: its slots are re-planned"),
    }
    kind, message = texts[change.change]
    return NewEvent(kind=kind, message=message, host=change.host)
