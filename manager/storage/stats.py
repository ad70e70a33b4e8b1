"""Master reports -> per-queue work over the stats window (pure, clock passed in).

Slot counters in a report are totals since the slot's fork. Each report adds, per queue,
the growth of its slots' counters since the host's previous report, and the slot-seconds
its slots lived in between. The first report of a host after it (re)joins only sets the
baseline: totals from before we watched would inflate the window.
"""
from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from config.models import QueueConfig
from manager.storage.model import QueueStats
from master.report import HostReport, QueueSettingsReport, SlotReport


@dataclass(frozen=True, slots=True)
class Work:
    """What the slots of one queue did between two reports of one host."""

    at: float
    queue: str
    jobs_done: int = 0
    busy_s: float = 0.0
    errors: int = 0
    slot_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Totals:
    jobs_done: int = 0
    busy_s: float = 0.0
    errors: int = 0
    slot_s: float = 0.0

    def plus(self, work: Work) -> Totals:
        return Totals(
            self.jobs_done + work.jobs_done,
            self.busy_s + work.busy_s,
            self.errors + work.errors,
            self.slot_s + work.slot_s,
        )


@dataclass(frozen=True, slots=True)
class _Seen:
    pid: int
    jobs_done: int
    busy_s: float
    errors: int


@dataclass(slots=True)
class _Host:
    at: float
    slots: dict[int, _Seen] = field(default_factory=dict)


class WorkWindow:
    """Work per queue over the last `window_s` seconds, from successive host reports.

    `max_gap_s` bounds the slot-seconds one report may add: after a long silence the slots
    may not have lived all along (the host was lost), so the gap is not counted in full.
    """

    def __init__(self, *, window_s: float, max_gap_s: float, started_at: float) -> None:
        self.window_s = window_s
        self.max_gap_s = max_gap_s
        self.started_at = started_at
        self._hosts: dict[str, _Host] = {}
        self._work: deque[Work] = deque()

    def on_report(self, report: HostReport, now: float) -> list[Work]:
        previous = self._hosts.get(report.host)
        self._hosts[report.host] = _Host(
            at=now, slots={s.slot_id: _seen(s) for s in report.slots}
        )
        if previous is None:
            return []
        gap_s = min(max(now - previous.at, 0.0), self.max_gap_s)
        by_queue: dict[str, Work] = {}
        for slot in report.slots:
            before = previous.slots.get(slot.slot_id)
            if before is not None and before.pid != slot.pid:
                before = None
            work = _growth(slot, before, now, gap_s)
            by_queue[slot.queue] = _add(by_queue.get(slot.queue), work)
        added = [by_queue[q] for q in sorted(by_queue)]
        self._work.extend(added)
        return added

    def forget(self, host: str) -> None:
        """The host is lost: its next report starts a new baseline."""
        self._hosts.pop(host, None)

    def prune(self, now: float) -> None:
        while self._work and self._work[0].at < now - self.window_s:
            self._work.popleft()

    def effective_window_s(self, now: float) -> float:
        """The window, or less while the manager has watched for a shorter time."""
        return max(min(self.window_s, now - self.started_at), 1e-3)

    def totals(self, now: float, *, since: float | None = None) -> dict[str, Totals]:
        """Per queue, the work reported after `since` (default: the window's start)."""
        self.prune(now)
        start = now - self.window_s if since is None else since
        result: dict[str, Totals] = {}
        for work in self._work:
            if work.at > start:
                result[work.queue] = result.get(work.queue, Totals()).plus(work)
        return result

    def queue_stats(self, now: float, waiting: Mapping[str, int]) -> dict[str, QueueStats]:
        """The planner's input: window totals per queue plus the jobs waiting now."""
        window_s = self.effective_window_s(now)
        totals = self.totals(now)
        return {
            queue: QueueStats(
                waiting_jobs=waiting.get(queue, 0),
                jobs_done=totals.get(queue, Totals()).jobs_done,
                busy_s=totals.get(queue, Totals()).busy_s,
                slot_lifetime_s=totals.get(queue, Totals()).slot_s,
                window_s=window_s,
            )
            for queue in sorted(set(totals) | set(waiting))
        }


def _seen(slot: SlotReport) -> _Seen:
    return _Seen(slot.pid, slot.jobs_done, slot.busy_s, slot.errors)


def _growth(slot: SlotReport, before: _Seen | None, now: float, gap_s: float) -> Work:
    """A slot's work since `before`; a slot new since the last report counts from its fork."""
    if before is None:
        return Work(now, slot.queue, slot.jobs_done, slot.busy_s, slot.errors,
                    min(gap_s, max(slot.uptime_s, 0.0)))
    return Work(
        now,
        slot.queue,
        max(slot.jobs_done - before.jobs_done, 0),
        max(slot.busy_s - before.busy_s, 0.0),
        max(slot.errors - before.errors, 0),
        gap_s,
    )


def _add(total: Work | None, work: Work) -> Work:
    if total is None:
        return work
    return Work(
        total.at,
        total.queue,
        total.jobs_done + work.jobs_done,
        total.busy_s + work.busy_s,
        total.errors + work.errors,
        total.slot_s + work.slot_s,
    )


def settings_in_force(reports: Iterable[HostReport]) -> dict[str, QueueSettingsReport]:
    """Per queue, the settings the masters give its slots. Hosts agree when they run the
    same config and handler code; while they do not (a rolling deploy), the value most
    hosts use is shown (ties: the smaller batch size, so the choice does not flip)."""
    seen: dict[str, Counter[QueueSettingsReport]] = {}
    for report in reports:
        for queue, settings in report.queue_settings.items():
            seen.setdefault(queue, Counter())[settings] += 1
    return {
        queue: min(tally, key=lambda s: (-tally[s], s.batch_size, s.batch_size_source, s.handler))
        for queue, tally in sorted(seen.items())
    }


def with_batch_sizes(
    queues: Mapping[str, QueueConfig], in_force: Mapping[str, QueueSettingsReport],
) -> dict[str, QueueConfig]:
    """The queues' configs with each reported queue's batch size in force."""
    return {
        name: config if name not in in_force or in_force[name].batch_size == config.batch_size
        else config.model_copy(update={"batch_size": in_force[name].batch_size})
        for name, config in queues.items()
    }
