"""Where the sentinel's authority record starts (manager/failover/sentinel.py): the first record of
a new cluster, or a record above every epoch the servers report when the database is new
or restored while the cluster runs (issue 25, 5). Pure logic over the servers' ROLE views.

A record below a server's epoch would be refused by every server (`409 Stale Epoch`): the
primary never leased, every write `500 Offline Mode`. So the servers' word is taken: the
primary of the highest epoch they report stays primary, in the epoch above it, with its
own sync state (a primary gone on alone starts the record with no replica in sync). No
primary of that epoch answering: nobody is chosen (a replica of it may lack what it
acknowledged alone); the sentinel says what it found and looks again next turn.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from manager.failover.authority import Record

ALONE_WORDS = frozenset({"alone", "asking"})  # ROLE <sync>: no replica in sync (sync_commit.py)


class RoleView(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def sync(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def lease(self) -> str: ...
    @property
    def in_sync(self) -> tuple[str, ...]: ...
    @property
    def position(self) -> int: ...
    @property
    def min_sync(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class Plan:
    """The record to write (`record`), or None: no primary to name yet (`why`)."""

    record: Record | None
    why: str


def plan(record: Record | None, views: Mapping[str, RoleView | None]) -> Plan | None:
    """None while `record` stands (no server reports a later epoch); else what to write."""
    answering = {address: view for address, view in views.items() if view is not None}
    top = max((view.epoch for view in answering.values()), default=0)
    if record is not None and top <= record.epoch:
        return None
    if record is None and top == 0:
        # A new cluster: the first server that says it is primary, or the first answering.
        primaries = [a for a, v in answering.items() if v.role == "primary"]
        chosen = (primaries or list(answering) or [""])[0]
        if not chosen:
            return Plan(None, "no queue server answers")
        return Plan(_record(1, chosen, answering[chosen]), "a new cluster")
    primaries = [a for a, v in answering.items() if v.role == "primary" and v.epoch == top]
    if not primaries:
        return Plan(None, f"no primary of epoch {top} answers; a replica of it may lack what it "
                          "acknowledged: waiting for it (or an operator)")
    chosen = max(primaries, key=lambda a: answering[a].position)
    why = ("no record in this database" if record is None
           else f"the record's epoch {record.epoch} is below the servers' (a restored database?)")
    return Plan(_record(top + 1, chosen, answering[chosen]), why)


def _record(epoch: int, primary: str, view: RoleView) -> Record:
    if view.role != "primary":
        return Record(epoch, primary, True, (), view.min_sync)
    return Record(epoch, primary, view.sync not in ALONE_WORDS, tuple(sorted(view.in_sync)),
                  view.min_sync)


def found(views: Mapping[str, RoleView | None]) -> str:
    """What the servers said, for the log: `HOST:PORT role epoch N lease L sync S position P`."""
    said = []
    for address, view in views.items():
        if view is None:
            said.append(f"{address} silent")
        else:
            said.append(f"{address} {view.role} epoch {view.epoch} lease {view.lease} "
                        f"sync {view.sync} position {view.position}")
    return "; ".join(said)
