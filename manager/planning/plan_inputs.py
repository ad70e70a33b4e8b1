"""What each plan reads besides the masters' reports: the queue server's STATS and the admin's overrides.

Either may be unavailable; the plan then goes on with the last figures, or without
overrides, and says so once.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping

from sqlalchemy.exc import SQLAlchemyError

from config.models import QueueConfig
from manager.events.cancel_events import CancelEvents
from manager.events.event_builders import override_events
from manager.events.failures import failed_attempts, failure_events
from manager.events.job_actions import job_action_events
from manager.storage.store import EventKind, NewEvent, Override, Store
from queue_server.client import QueueClient
from queue_server.protocol.client_errors import QueueServerError
from queue_server.protocol.replies import QueueStats as ServerQueueStats

log = logging.getLogger(__name__)


# Queues named per `STATS q1|q2|...`: 400 names of up to 128 characters fit the line limit.
NAMES_PER_REQUEST = 400
# The fullest queues read besides the configured ones (`STATS TOP n`): those no config names
# get a sample row, so the Queues page shows jobs that no slot will take (issue 15).
FULLEST_QUEUES = 20
OTHERS = "*"  # STATS TOP's entry for the queues left out


class QueueStatsReader:
    """STATS of the configured queues (the only ones a plan uses): `STATS q1|q2|...`, so
    a server holding 50,000 other queues costs nothing here (a whole STATS of them stalled
    the manager 2.8 s). A server without that form: all of STATS; without STATS: TOTAL
    per queue."""

    def __init__(self, client: QueueClient) -> None:
        self.client = client
        self.has_stats_of = True
        self.has_stats = True

    def read(self, queues: Mapping[str, QueueConfig]) -> dict[str, ServerQueueStats]:
        if self.has_stats_of:
            try:
                return self._read_named(sorted(queues))
            except QueueServerError as exc:
                if exc.code != 400:
                    raise
                log.warning("the queue server refuses STATS q1|q2|... (%s); reading all of STATS", exc)
                self.has_stats_of = False
        if self.has_stats:
            try:
                return self.client.stats()
            except QueueServerError as exc:
                if exc.code != 400:
                    raise
                log.warning("the queue server refuses STATS (%s); using TOTAL per queue", exc)
                self.has_stats = False
        result: dict[str, ServerQueueStats] = {}
        for name in queues:
            total = self.client.total(name)
            result[name] = ServerQueueStats(
                queue=name, ready=total.jobs, delayed=0, running=total.running, put=0, done=0,
                later=0, expired=0, by_priority={}, oldest_ready_age_s=None,
            )
        return result

    def fullest_unconfigured(self, queues: Mapping[str, QueueConfig]) -> dict[str, ServerQueueStats]:
        """Among the FULLEST_QUEUES queues holding the most jobs, those `queues` leaves out (a
        server without STATS TOP: none)."""
        if not self.has_stats_of:
            return {}
        try:
            top = self.client.stats_top(FULLEST_QUEUES)
        except QueueServerError as exc:
            if exc.code != 400:
                raise
            return {}
        return {name: stats for name, stats in top.items() if name != OTHERS and name not in queues}

    def _read_named(self, names: list[str]) -> dict[str, ServerQueueStats]:
        result: dict[str, ServerQueueStats] = {}
        for start in range(0, len(names), NAMES_PER_REQUEST):
            result.update(self.client.stats_of(names[start:start + NAMES_PER_REQUEST]))
        return result


class ServerFigures:
    """The queue server's figures at the last plan, and the failures since the plan before."""

    def __init__(self, reader: QueueStatsReader, cancels: CancelEvents | None = None) -> None:
        self.reader = reader
        self.cancels = cancels
        self.stats: dict[str, ServerQueueStats] = {}
        self.read_once = False
        # Failed attempts per queue between the last two STATS reads (None: no baseline yet).
        self.failed_since_plan: dict[str, int] | None = None
        self.down = False

    def read(self, queues: Mapping[str, QueueConfig]) -> list[NewEvent]:
        """Read afresh; the events this read means (an outage once, failures per queue)."""
        # None until a read succeeded: no baseline (an empty dict is a server with no queues yet).
        previous = self.stats if self.read_once else None
        try:
            self.stats = {**self.reader.fullest_unconfigured(queues), **self.reader.read(queues)}
        except QueueServerError as exc:
            events = []
            if not self.down:
                log.warning("queue server stats unavailable (%s); planning on the last figures", exc)
                events.append(NewEvent(
                    kind=EventKind.QUEUE_SERVER_UNREACHABLE,
                    message=f"queue server stats unavailable ({exc}); planning on the last figures",
                ))
            self.down = True
            self.failed_since_plan = None  # unknown: the slots' errors stand in
            return events
        self.down = False
        self.read_once = True
        self.failed_since_plan = failed_attempts(previous, self.stats)
        return (failure_events(previous, self.stats) + job_action_events(previous, self.stats)
                + self._cancel_events())

    def _cancel_events(self) -> list[NewEvent]:
        """One per cancel outside the dashboard (manager/events/cancel_events.py)."""
        if self.cancels is None:
            return []
        try:
            return self.cancels.read(self.reader.client)
        except (QueueServerError, SQLAlchemyError) as exc:
            log.warning("cannot read the queue server's cancels (%s); read again at the next plan", exc)
            return []

    def waiting(self) -> dict[str, int]:
        return {name: s.ready for name, s in self.stats.items()}


class OverrideReader:
    """The admin's runtime changes per queue, with an event for each new or changed one."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: dict[str, float] = {}
        # The overrides of the last read (a burst plan between reads applies them too).
        self.last: dict[str, Override] = {}

    def read(self) -> tuple[dict[str, Override], list[NewEvent]]:
        try:
            overrides = self.store.overrides()
        except SQLAlchemyError as exc:
            log.error("cannot read queue overrides (%s); planning without them", exc)
            return {}, []
        events = override_events(self.seen, overrides)
        for event in events:
            log.info("%s", event.message)
        self.seen = {name: o.updated_at_unix for name, o in overrides.items()}
        self.last = overrides
        return overrides, events
