"""`host_capped_by_load` and `host_load_cap_lifted` events from the masters' reports (pure).

A master whose load average is over max_load_per_cpu x CPUs runs fewer slots than its memory
allows (master/capacity.py), and the planner gives it fewer: without a word the dashboard
showed a host doing little. One event when the cap starts and one when it ends, not one per
report: the cap's size moves with the load every second.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from manager.storage.store import EventKind, NewEvent
from master.report import HostReport


@dataclass(slots=True)
class LoadCaps:
    # host -> capped at its last report
    _capped: dict[str, bool] = field(default_factory=dict)

    def on_report(self, report: HostReport) -> NewEvent | None:
        notice = report.load_cap()
        was = self._capped.get(report.host, False)
        self._capped[report.host] = notice is not None
        if (notice is not None) == was:
            return None
        detail = {"load_avg_1m": report.load_avg_1m, "cpus": report.cpus,
                  "load_limit": report.load_limit, "capacity": report.capacity,
                  "capacity_by_memory": report.capacity_by_memory, "max_slots": report.max_slots}
        if notice is not None:
            return NewEvent(kind=EventKind.HOST_CAPPED_BY_LOAD, host=report.host, actor="master",
                            message=f"{report.host} {notice}", detail=detail)
        return NewEvent(kind=EventKind.HOST_LOAD_CAP_LIFTED, host=report.host, actor="master",
                        message=(f"{report.host} no longer capped by load (load "
                                 f"{report.load_avg_1m:.2f} on {report.cpus} CPUs): "
                                 f"{report.capacity} slots"), detail=detail)
