"""Events for retries and deletes of jobs made outside the dashboard (pure): the CLI, a program.

The queue server counts RETRY and DELETE per queue and per door, the name a client gives
with CLIENT NAME (`slotmap retry/delete` is `cli`, a client that gives none is `client`).
Each plan's STATS read turns the growth since the read before into one event per queue,
verb and door, actor the door. The dashboard and its JSON API write their own events at
once, with the keys and the admin's address (admin_ui/jobs.py), so their doors are skipped
here. The first read only sets the baseline; a counter that went down means the queue
server restarted (its counters start at 0), as in manager/events/failures.py.
"""
from __future__ import annotations

from collections.abc import Mapping

from manager.events.failures import growth
from manager.storage.store import EventKind, NewEvent
from queue_server.protocol.replies import QueueStats

# Doors that write their own events (admin_ui/jobs.py DOOR_WORDS).
SELF_REPORTING = frozenset({"dashboard", "api"})
DOOR_WORDS = {"cli": "with the CLI (slotmap {verb})", "client": "by a queue client ({VERB} request)"}


def _words(door: str, verb: str) -> str:
    template = DOOR_WORDS.get(door, "by queue client {door!r} ({VERB} request)")
    return template.format(verb=verb, VERB=verb.upper(), door=door)


def job_action_events(before: Mapping[str, QueueStats] | None,
                      after: Mapping[str, QueueStats]) -> list[NewEvent]:
    """`before` None: the first read, which only sets the baseline."""
    if before is None:
        return []
    events: list[NewEvent] = []
    for name in sorted(after):
        now, was = after[name], before.get(name)
        for verb, kind, counts, old in (
            ("retry", EventKind.JOBS_RETRIED, now.retried_by, was.retried_by if was else {}),
            ("delete", EventKind.JOBS_DELETED, now.deleted_by, was.deleted_by if was else {}),
        ):
            for door in sorted(counts):
                count = growth(old.get(door, 0), counts[door])
                if door in SELF_REPORTING or not count:
                    continue
                done = "retried" if verb == "retry" else "deleted"
                events.append(NewEvent(
                    kind=kind, queue=name, actor=door,
                    message=f"{name}: {count} job{'' if count == 1 else 's'} {done} {_words(door, verb)}",
                    detail={"count": count, "door": door},
                ))
    return events
