"""The primary's side of the replication links' liveness and confirmations.

A replica opts in by sending `REPLACK <bytes>` (queue_server/server/follower.py does,
after each of its commits and every HEARTBEAT_S): from then on the primary sends it an
empty line whenever nothing was streamed to it for a heartbeat, and cuts the link when it
stays silent for LIVENESS heartbeats (it reconnects and resyncs, or it is gone). A link
that never sent REPLACK (a sockPQd peer) is left as it always was. In sync mode the
confirmations go to SyncCommit (sync_commit.py). No import of the server's other modules:
the journal and the links are seen through the small protocols below.
"""
from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from queue_server.server.liveness import SILENCE_LIMIT_S, Heard
from queue_server.server.sync_commit import Released, SyncCommit

log = logging.getLogger("slotmap.queue_server")

L = TypeVar("L", bound=Hashable)  # a replication link (a Connection in the server)


class Stream(Protocol[L]):
    """What the journal tells and does for the links (journal.py)."""

    @property
    def sent(self) -> dict[L, int]: ...  # link -> bytes streamed to it since its snapshot

    @property
    def appended(self) -> int: ...  # bytes of records written since start

    @property
    def records(self) -> int: ...  # records written since start

    def heartbeat(self, links: list[L]) -> None: ...

    def cut(self, link: L, why: str) -> None: ...


class ReplicaWatch(Generic[L]):
    def __init__(self, stream: Stream[L], sync: SyncCommit | None) -> None:
        self.stream = stream
        self.sync = sync
        self.heard: dict[L, Heard] = {}  # links that sent REPLACK
        self.confirmed: dict[L, int] = {}  # link -> bytes its last REPLACK confirmed
        # link -> its position (records of our history) at that REPLACK, when it says
        self.confirmed_records: dict[L, int] = {}
        self._sent_at_tick: dict[L, int] = {}
        # Links whose confirmations count (a replica in sync, ROLE's list): those sent a
        # snapshot, from the address they claim. An INTERCONNECT link was sent no snapshot,
        # so its REPLACK 0 proves nothing about what it holds (issue 25 point 6).
        self.may_confirm: set[L] = set()

    def linked(self, link: L, *, may_confirm: bool = True) -> None:
        if not may_confirm:
            return
        self.may_confirm.add(link)
        if self.sync is not None:
            self.sync.link_added(link)

    def acked(self, link: L, confirmed_bytes: int, now: float, confirmed_records: int | None = None) -> Released:
        """A REPLACK on `link` (its numbers already bounded by numbers.py). One that claims
        more than was streamed to the link, or a position past every record written here,
        is garbled or from another history: the link is cut (the replica resyncs) rather
        than letting it release held replies or show a lag of 0 it does not have."""
        sent = self.stream.sent.get(link)
        if sent is None:
            return []  # cut already (a REPLACK read in the same turn as the cut)
        wrong = _beyond(confirmed_bytes, sent, confirmed_records, self.stream.records)
        if wrong is not None:
            self.stream.cut(link, wrong)
            self._forget(link)
            return []
        self.confirmed[link] = confirmed_bytes
        if confirmed_records is not None:
            self.confirmed_records[link] = confirmed_records
        heard = self.heard.get(link)
        if heard is None:
            self.heard[link] = Heard(now)
        else:
            heard.at = now
        if self.sync is None or link not in self.stream.sent or link not in self.may_confirm:
            return []
        return self.sync.ack(link, confirmed_bytes)

    def tick(self, now: float) -> Released:
        """Every HEARTBEAT_S: heartbeats to idle links, silent links cut, the sync timeout."""
        sent = self.stream.sent
        for link in [link for link in self.heard if link not in sent]:
            self._forget(link)
        for link in [link for link in self.may_confirm if link not in sent]:
            self.may_confirm.discard(link)
        idle = []
        for link, heard in list(self.heard.items()):
            if heard.dead(now):
                self.stream.cut(link, f"the replica sent nothing for {heard.silent_for(now):.1f} s "
                                      f"(liveness {SILENCE_LIMIT_S:.1f} s)")
                self._forget(link)
            elif sent[link] == self._sent_at_tick.get(link):
                idle.append(link)
        if idle:
            self.stream.heartbeat(idle)
        self._sent_at_tick = {link: sent[link] for link in self.heard}
        return [] if self.sync is None else self.sync.tick(now)

    def _forget(self, link: L) -> None:
        self.may_confirm.discard(link)
        self.heard.pop(link, None)
        self.confirmed.pop(link, None)
        self.confirmed_records.pop(link, None)
        if self.sync is not None:
            self.sync.link_gone(link)

    def heard_links(self) -> list[L]:
        """Links that confirmed within the liveness limit and are not cut (ROLE): a link cut
        between two ticks (a REPLACK that does not parse) is forgotten only at the next."""
        sent = self.stream.sent
        return [link for link in self.heard if link in sent and link in self.may_confirm]

    def in_sync_links(self) -> int:
        return len(self.heard_links())


def _beyond(confirmed_bytes: int, sent: int, confirmed_records: int | None, written: int) -> str | None:
    """Why a REPLACK cannot be true of this primary's stream, or None."""
    if confirmed_bytes > sent:
        return f"its REPLACK confirmed {confirmed_bytes} bytes, only {sent} were streamed to it"
    if confirmed_records is not None and confirmed_records > written:
        return (f"its REPLACK put it at record {confirmed_records}, past the {written} "
                "records written here")
    return None
