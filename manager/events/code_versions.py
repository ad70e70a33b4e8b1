"""`host_code_reloaded` and `host_code_reload_refused` events from the masters' reports (pure).

A master reports its handler code's version, how many code reloads took (the generation)
and its last refused reload (master/reloading.py). One event when a host's generation moves
on (with the versions before and after) and one when a new refusal appears, not one per
report. A master that restarts starts again at generation 0: no event, its version is seen.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from manager.storage.store import EventKind, NewEvent
from master.report import HostReport


@dataclass(frozen=True, slots=True)
class _Seen:
    master_pid: int
    generation: int
    version: str
    failure: str | None


@dataclass(slots=True)
class CodeVersions:
    _seen: dict[str, _Seen] = field(default_factory=dict)

    def on_report(self, report: HostReport) -> list[NewEvent]:
        now = _Seen(report.master_pid, report.code_generation, report.code_version,
                    report.code_reload_failure)
        before = self._seen.get(report.host)
        self._seen[report.host] = now
        if before is None or before.master_pid != now.master_pid:
            return []
        events: list[NewEvent] = []
        if now.generation > before.generation:
            events.append(NewEvent(
                kind=EventKind.HOST_CODE_RELOADED, host=report.host, actor="master",
                message=f"{report.host} reloaded its handler code: version {before.version or '-'} -> "
                        f"{now.version or '-'} (generation {now.generation})",
                detail={"from": before.version, "to": now.version, "generation": now.generation},
            ))
        if now.failure is not None and now.failure != before.failure:
            events.append(NewEvent(
                kind=EventKind.HOST_CODE_RELOAD_REFUSED, host=report.host, actor="master",
                message=f"{report.host} {now.failure}",
                detail={"version": now.version, "generation": now.generation},
            ))
        return events


def other_code(hosts: Iterable[tuple[str, bool, str | None]]) -> set[str]:
    """Of (host, alive, code version): the live hosts whose version is not the one most live
    hosts run (a rolling deploy under way, or a host left behind); a tie goes to the version
    seen first (hosts in name order)."""
    live = [(host, version) for host, alive, version in hosts if alive and version]
    versions = Counter(version for _, version in live)
    if len(versions) < 2:
        return set()
    common = versions.most_common(1)[0][0]
    return {host for host, version in live if version != common}
