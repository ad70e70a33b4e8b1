"""A `job_cancelled` event for each cancel made outside the dashboard (the CLI, a program),
read from the queue server's ring of recent cancels (CANCELLED) at each plan.

One event per cancel: the dashboard and its JSON API write their own at once, with the
admin's address (admin_ui/job_cancel.py), so their doors are skipped here, as for retries
and deletes (job_actions.py). Each event names the ring and position it came from, so a
manager that starts (a restart, a new leader) goes on after the newest one the database
holds for that ring, neither repeating nor skipping one. A ring the database has no event
of (the queue server restarted or failed over since) is read from its start. Cancels the
ring dropped before they were read (more than its size between two plans) are counted in
one event.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from manager.events.job_actions import SELF_REPORTING
from manager.storage.store import EventKind, NewEvent, Store
from manager.storage.store_reads import EventQuery, reading
from queue_server.client import QueueClient
from queue_server.client.cancels import CancelEntry, CancelPage
from queue_server.protocol.cancels import NO_RING
from queue_server.protocol.client_errors import QueueServerError

log = logging.getLogger(__name__)

# The newest job_cancelled events a starting manager looks through for its ring's position.
LOOK_BACK_EVENTS = 500
DOOR_WORDS = {"cli": "with the CLI (slotmap cancel)", "client": "by a queue client (CANCEL request)"}


def cancel_event(entry: CancelEntry, ring: str) -> NewEvent:
    what = "removed (it was not running)" if entry.lease == 0 else "cancelled while running (its slot is stopped)"
    words = DOOR_WORDS.get(entry.door, f"by queue client {entry.door!r} (CANCEL request)")
    return NewEvent(
        kind=EventKind.JOB_CANCELLED, queue=entry.queue, actor=entry.door,
        message=f"{entry.queue}: job {entry.key} {what} {words}",
        detail={"key": entry.key, "outcome": "removed" if entry.lease == 0 else "cancelled",
                "door": entry.door, "at_unix": entry.at, "ring": ring, "seq": entry.seq},
    )


def cancel_events(page: CancelPage, *, since: int, known_ring: bool) -> list[NewEvent]:
    """`known_ring`: the ring read before (else `missed` counts what a new reader never saw)."""
    events = [cancel_event(entry, page.ring) for entry in page.cancels
              if entry.seq > since and entry.door not in SELF_REPORTING]
    if page.missed and known_ring:
        events.append(NewEvent(
            kind=EventKind.JOB_CANCELLED, actor="manager",
            message=f"{page.missed} cancels went unread (more than the queue server's ring holds "
                    "between two plans): no event names them",
            detail={"missed": page.missed, "ring": page.ring}))
    return events


def position_in_store(store: Store, ring: str) -> int:
    """The newest position of `ring` the database has an event of (0: none)."""
    with reading(store) as reads:
        found, _ = reads.events(EventQuery(kind=EventKind.JOB_CANCELLED, limit=LOOK_BACK_EVENTS))
    seqs = [int(seq) for event in found if event.detail and event.detail.get("ring") == ring
            and isinstance(seq := event.detail.get("seq"), int)]
    return max(seqs, default=0)


class CancelEvents:
    """The ring's position this manager has written events up to."""

    def __init__(self, position_of: Callable[[str], int]) -> None:
        self.position_of = position_of
        self.ring = NO_RING
        self.since = 0
        self.refused = False

    def read(self, client: QueueClient) -> list[NewEvent]:
        """Errors raise (QueueServerError, SQLAlchemyError): the caller's plan goes on."""
        if self.refused:
            return []
        try:
            page = client.cancelled(self.ring, self.since)
        except QueueServerError as exc:
            if exc.code != 400:
                raise
            log.warning("the queue server refuses CANCELLED (%s); cancels from the CLI get no event", exc)
            self.refused = True
            return []
        known = page.ring == self.ring
        events = cancel_events(page, since=self.since if known else self.position_of(page.ring),
                               known_ring=known)
        self.ring, self.since = page.ring, page.last
        return events
