"""`slot_crashed` events from the masters' reports (pure).

Each report repeats its master's latest crashes with a sequence number (master/crashes.py);
the ones not seen before become events. One crash is one event (queue, host, pid, exit code
or signal, the job charged with it); a storm is folded: per host and queue at most one event
every FOLD_S seconds, holding the count, the causes and the first MAX_LISTED crashes. So a
handler that crashes on every job writes a handful of rows a minute, never one per fork;
a setup() that fails is told by its own event (manager/events/start_failures.py).
Crashes from before the manager started (a manager restarted beside running masters) are
not repeated.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from manager.storage.store import EventKind, NewEvent
from master.crashes import SlotCrash
from master.report import HostReport
from slot.exit_codes import describe_exit

FOLD_S = 10.0
MAX_LISTED = 20
# A slot whose setup() raised is a failed start, forked again after each back-off (up to a
# minute): told once per distinct error by `handler_start_failed` (manager/events/start_failures.py),
# not as one crash event a minute for as long as it lasts. /metrics still counts each.
TOLD_ELSEWHERE = frozenset({"setup_failed"})


@dataclass(slots=True)
class _Seen:
    master_pid: int
    seq: int


@dataclass(slots=True)
class CrashEvents:
    started_unix: float
    _seen: dict[str, _Seen] = field(default_factory=dict)
    # (host, queue) -> crashes not told yet, and when that pair's last event went out
    _pending: dict[tuple[str, str], list[SlotCrash]] = field(default_factory=dict)
    _told_at: dict[tuple[str, str], float] = field(default_factory=dict)

    def on_report(self, report: HostReport, now: float) -> list[NewEvent]:
        """The events due after this report (`now`: the manager's monotonic clock)."""
        seen = self._seen.get(report.host)
        if seen is None or seen.master_pid != report.master_pid:
            seen = self._seen[report.host] = _Seen(report.master_pid, 0)
        for crash in report.crashes:
            if crash.seq <= seen.seq or crash.at_unix < self.started_unix or crash.cause in TOLD_ELSEWHERE:
                continue
            self._pending.setdefault((report.host, crash.queue), []).append(crash)
        seen.seq = max([seen.seq, *(crash.seq for crash in report.crashes)])
        return self.due(now)

    def due(self, now: float) -> list[NewEvent]:
        events = []
        for (host, queue), crashes in list(self._pending.items()):
            if now - self._told_at.get((host, queue), float("-inf")) < FOLD_S:
                continue
            del self._pending[(host, queue)]
            self._told_at[(host, queue)] = now
            events.append(crash_event(host, queue, crashes))
        return events


def crash_event(host: str, queue: str, crashes: Sequence[SlotCrash]) -> NewEvent:
    causes = Counter(crash.cause for crash in crashes)
    listed = [_detail(crash) for crash in crashes[:MAX_LISTED]]
    detail = {"count": len(crashes), "causes": dict(causes), "crashes": listed}
    if len(crashes) == 1:
        [crash] = crashes
        charged = f"; job {crash.key} charged" if crash.key else ""
        kept = (f"; {crash.honoured} outcomes kept, {crash.given_back} jobs given back uncharged"
                if crash.honoured or crash.given_back else "")
        message = (f"{queue}: slot {crash.slot_id} (pid {crash.pid}) on {host} "
                   f"{_how(crash)}{charged}{kept}")
    else:
        keys = [crash.key for crash in crashes if crash.key]
        charged = f"; jobs charged: {', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''}" if keys else ""
        how = ", ".join(f"{cause} x{n}" for cause, n in causes.most_common())
        message = f"{queue}: {len(crashes)} slot crashes on {host} ({how}){charged}"
    return NewEvent(kind=EventKind.SLOT_CRASHED, message=message, queue=queue, host=host,
                    actor="master", detail=detail)


def _how(crash: SlotCrash) -> str:
    text = describe_exit(crash.exit_code, crash.signal)
    if crash.cause in ("hung", "over_memory", "stop_deadline"):
        text += f" (killed by its master: {crash.cause.replace('_', ' ')})"
    return text


def _detail(crash: SlotCrash) -> dict[str, object]:
    return {"pid": crash.pid, "slot": crash.slot_id, "at": crash.at_unix, "exit_code": crash.exit_code,
            "signal": crash.signal, "cause": crash.cause, "key": crash.key,
            "honoured": crash.honoured, "given_back": crash.given_back, "charged": crash.charged}
