"""`handler_start_failed` events from the masters' reports (pure): once per distinct error.

A master reports each queue's last setup() error and its failed handler imports, with the
count of failures since the same error was first seen (master/start_failures.py). A slot
whose setup() keeps failing is forked again after each back-off, so the report's count grows
and its `last_at_unix` moves: that is the same failure, told once. A new event comes when the
error text changes, or when the same error comes back after the queue's slots had started
(its `first_at_unix` is new). The event holds what the hosts' samples do not: the traceback's
tail. A restarted manager tells the failures that stand once more.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from manager.storage.store import EventKind, NewEvent
from master.report import HostReport
from master.start_failures import StartFailure

# Failures remembered per host: those of its last report (at most master/start_failures.py's
# MAX_REPORTED), so a host's memory here is bounded by what it reports.
_Key = tuple[str, str | None, str, str, float]


def _key(failure: StartFailure) -> _Key:
    return (failure.kind, failure.queue, failure.source, failure.error, failure.first_at_unix)


@dataclass(slots=True)
class StartFailureEvents:
    _told: dict[str, set[_Key]] = field(default_factory=dict)

    def on_report(self, report: HostReport) -> list[NewEvent]:
        told = self._told.get(report.host, set())
        now = {_key(failure): failure for failure in report.start_failures}
        self._told[report.host] = set(now)
        return [start_failure_event(report.host, failure) for key, failure in now.items() if key not in told]


def start_failure_event(host: str, failure: StartFailure) -> NewEvent:
    if failure.kind == "setup":
        what = f"{failure.queue}: {failure.source} failed on {host}"
        retry = (f"; its slots are forked again after a back-off ({failure.retry_in_s:.0f} s now)"
                 if failure.retry_in_s is not None else "")
    else:
        what = f"{host}: handler {failure.source} failed to import"
        retry = "; its queues get no slots on this host until it is fixed and the master restarted"
    seen = f" ({failure.count} times since {_clock(failure.first_at_unix)})" if failure.count > 1 else ""
    return NewEvent(
        kind=EventKind.HANDLER_START_FAILED, host=host, queue=failure.queue, actor="master",
        message=f"{what}: {failure.error}{seen}{retry}",
        detail={"kind": failure.kind, "source": failure.source, "error": failure.error,
                "traceback": failure.traceback, "count": failure.count,
                "first_at_unix": failure.first_at_unix, "last_at_unix": failure.last_at_unix},
    )


def _clock(at_unix: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(at_unix))
