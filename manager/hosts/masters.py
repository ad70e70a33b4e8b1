"""The manager's side of the masters: reports in (from the connection each host joined on), joins and losses, each host's part of the map out.

Peers (manager/hosts/heartbeat.py) decides who is alive; this module does the socket work
around it and keeps the view the planner starts from. A change of a master comes back
to the caller as its event, which the caller records and answers with a plan.
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from config.models import QueueConfig
from manager.events.code_versions import CodeVersions
from manager.events.crash_events import CrashEvents
from manager.events.start_failures import StartFailureEvents
from manager.hosts.heartbeat import ADOPT, GONE, MasterState, PeerChange, Peers
from manager.hosts.host_events import change_event
from manager.hosts.link import ManagerSocket, Received
from manager.hosts.load_caps import LoadCaps
from manager.planning.placement import slot_number
from manager.storage.model import SlotMap
from manager.storage.stats import WorkWindow
from manager.storage.store import NewEvent
from master.lifecycle import SERVING
from master.manager_frames import DEFAULT_MAX_MESSAGE_BYTES, ManagerFrame
from master.report import HostReport

log = logging.getLogger(__name__)

# How long a lost host still shows in host samples before the manager forgets it.
FORGET_LOST_AFTER_S = 3600.0
# [manager] max_hosts' default, for callers without a config.
DEFAULT_MAX_HOSTS = 1024
# Half the default frame bound: the slot map and the frame's own fields have the rest.
MAX_QUEUES_PAYLOAD_BYTES = DEFAULT_MAX_MESSAGE_BYTES // 2


@dataclass(slots=True)
class View:
    """What the manager believes about the cluster: last reports and the slot map by host."""

    reports: dict[str, HostReport] = field(default_factory=dict)
    # host -> "host:n" -> queue: the map planned last, or adopted from a host's report.
    assigned: dict[str, dict[str, str]] = field(default_factory=dict)
    # Hosts whose part of the map the manager decided (the others are sent None).
    planned: set[str] = field(default_factory=set)


def adopt(report: HostReport) -> dict[str, str]:
    """A host's slots as its report lists them: the map rebuilt after a (re)join."""
    return {
        f"{report.host}:{slot.slot_id}": slot.assigned_queue
        for slot in report.slots
        if slot.state in SERVING
    }


def host_part(host: str, slots: Mapping[str, str]) -> dict[int, str]:
    """A host's part of the map as its master numbers slots."""
    return {slot_number(slot_id): queue for slot_id, queue in slots.items()}


class Masters:
    def __init__(
        self, socket: ManagerSocket, *, interval_s: float, liveness: int, stats_window_s: float,
        manager_pid: int, now: float, max_hosts: int = DEFAULT_MAX_HOSTS,
    ) -> None:
        self.socket = socket
        self.max_hosts = max_hosts
        self.interval_s = interval_s
        self.manager_pid = manager_pid
        self.peers = Peers(interval_s=interval_s, liveness=liveness)
        self.view = View()
        self.work = WorkWindow(window_s=stats_window_s, max_gap_s=self.peers.timeout_s, started_at=now)
        self.bound_seen_at: dict[str, float] = {}
        # Slot crashes from the reports: recorded by the caller, no re-plan (a crashed slot
        # is replaced by its master, the map does not change).
        self.crashes = CrashEvents(started_unix=time.time())
        self.report_events: list[NewEvent] = []
        # Load caps starting and ending: events from the reports, like the crashes.
        self.load_caps = LoadCaps()
        # Code reloads done and refused (a rolling deploy), the same way.
        self.code_versions = CodeVersions()
        # Handlers that cannot start (setup() or import errors): one event per distinct error.
        self.start_failures = StartFailureEvents()
        # After a config reload: the queues' settings, sent to each master until its report
        # says it runs their version (None: the masters keep their own files').
        self.queues: dict[str, QueueConfig] | None = None
        self.queues_version = ""

    def queue_settings(self, queues: Mapping[str, QueueConfig]) -> None:
        """A config reload's queues, for the masters with the next frames: their slots get the
        new batch sizes, retries, timeouts and limits (master/reloading.py apply_queues)."""
        # As the frame sends them (only the keys written): writing a default out changes the version.
        payload = json.dumps({name: q.model_dump(mode="json", exclude_unset=True) for name, q in sorted(queues.items())},
                             sort_keys=True).encode()
        if len(payload) > MAX_QUEUES_PAYLOAD_BYTES:
            log.error("the reloaded queue settings take %d bytes, over the %d a master frame may carry: "
                      "the masters keep their own (SIGHUP each master after changing its file)",
                      len(payload), MAX_QUEUES_PAYLOAD_BYTES)
            return
        self.queues = dict(queues)
        self.queues_version = hashlib.sha256(payload).hexdigest()[:16]

    # Reports in

    def listened(self, now: float) -> None:
        """The loop has just taken its frames: its own stall is not the masters' silence."""
        stall_s = self.peers.listened(now)
        if stall_s >= self.interval_s:
            log.warning("the manager did not listen to masters for %.1f s more than it meant to; "
                        "their silence meanwhile is not counted against them", stall_s)

    def on_frame(self, received: Received, now: float) -> list[NewEvent]:
        frame = received.frame
        report = frame.report
        if not self.from_its_connection(received, now) or not self.room_for(received, now):
            return []
        change = self.peers.on_report(
            report.host, routing_id=received.routing_id, master_pid=report.master_pid, now=now,
            leaving=frame.leaving,
        )
        self.report_events += self.crashes.on_report(report, now)
        if (capped := self.load_caps.on_report(report)) is not None:
            self.report_events.append(capped)
        self.report_events += self.code_versions.on_report(report)
        self.report_events += self.start_failures.on_report(report)
        if frame.leaving:
            # Kept only for a host the manager knows: goodbyes naming made-up hosts cost nothing.
            if self.peers.get(report.host) is not None:
                self.view.reports[report.host] = report
            return [self.on_change(change)] if change is not None else []
        if change is not None and change.change in ADOPT:
            self.work.forget(report.host)
        self.view.reports[report.host] = report
        self.work.on_report(report, now)
        return [self.on_change(change)] if change is not None else []

    def take_report_events(self) -> list[NewEvent]:
        events, self.report_events = self.report_events, []
        return events

    def from_its_connection(self, received: Received, now: float) -> bool:
        """Take a report for a host only from the connection it joined on, or once that one
        is gone (the master restarted or reconnected): with CURVE off anyone may connect,
        and a report, or a `leaving`, naming a live host from elsewhere would move its slots."""
        host = received.frame.report.host
        if received.key_owner is not None and received.key_owner != host:
            self.refuse(received, now, f"its CURVE key is {received.key_owner}'s")
            return False
        bound = self.peers.bound_elsewhere(host, received.routing_id)
        if bound is None:
            return True
        # Probe the bound connection with this host's heartbeat frame (False once it is
        # closed), at most once a heartbeat: a flood of spoofs is not relayed to the master.
        if now - self.bound_seen_at.get(host, float("-inf")) >= self.interval_s:
            if not self.send_part(host):
                return True
            self.bound_seen_at[host] = now
        self.refuse(received, now, f"the host is alive on connection {bound.hex()} (turn on CURVE "
                                   "to authenticate masters)")
        return False

    def room_for(self, received: Received, now: float) -> bool:
        """A report naming a host not tracked yet is taken while fewer than `max_hosts` are,
        making room by forgetting the longest-lost host if need be: a peer announcing
        thousands of host names costs at most max_hosts hosts' memory and rows."""
        host = received.frame.report.host
        if self.peers.get(host) is not None or received.frame.leaving or len(self.peers) < self.max_hosts:
            return True
        for lost in self.peers.lost_since(now):
            self.forget(lost)
            # Debug only: a peer cycling through names would otherwise write a line each.
            log.debug("forgot lost host %s to make room for host %s ([manager] max_hosts %d)",
                      lost, host, self.max_hosts)
            return True
        self.socket.refusals.refused(
            f"a new host past [manager] max_hosts {self.max_hosts}, all alive",
            f"a report for host {host} from connection {received.routing_id.hex()}", now)
        return False

    def refuse(self, received: Received, now: float, why: str) -> None:
        host = received.frame.report.host
        kind = "leaving" if received.frame.leaving else "report"
        self.socket.refusals.refused(
            f"a {kind} for a host from a connection not its own",
            f"a {kind} for host {host} from connection {received.routing_id.hex()}: {why}; "
            "the frame is dropped", now)

    def forget(self, host: str) -> None:
        """A lost host dropped for good (its history stays in SQL)."""
        self.peers.forget(host)
        self.view.reports.pop(host, None)
        self.view.assigned.pop(host, None)
        self.view.planned.discard(host)
        self.work.forget(host)
        self.bound_seen_at.pop(host, None)

    def expire(self, now: float) -> list[NewEvent]:
        events = [self.on_change(change) for change in self.peers.expire(now)]
        for host in self.peers.lost_since(now - FORGET_LOST_AFTER_S):
            self.forget(host)
        return events

    def on_change(self, change: PeerChange) -> NewEvent:
        host = change.host
        report = self.view.reports.get(host)
        if change.change in ADOPT and report is not None:
            self.view.assigned[host] = adopt(report)
            self.view.planned.discard(host)
            self.peer_send(host, slots=None)
        elif change.change in GONE:
            self.view.assigned.pop(host, None)
            self.view.planned.discard(host)
            self.work.forget(host)
        event = change_event(change, report)
        (log.warning if change.change in GONE else log.info)("%s", event.message)
        return event

    # Slot maps out

    def send_heartbeats(self) -> None:
        for peer in list(self.peers.alive()):
            self.send_part(peer.host)

    def take_plan(self, slot_map: SlotMap, alive: list[str]) -> None:
        """A new map: every alive host gets its part now."""
        self.view.assigned = {h: dict(slots) for h, slots in slot_map.hosts.items()}
        self.view.planned = set(alive)
        for host in alive:
            self.send_part(host)

    def send_part(self, host: str) -> bool:
        """False when the host's connection is gone."""
        if host in self.view.planned:
            return self.peer_send(host, slots=host_part(host, self.view.assigned.get(host, {})))
        return self.peer_send(host, slots=None)

    def peer_send(self, host: str, *, slots: dict[int, str] | None) -> bool:
        peer = self.peers.get(host)
        if peer is None:
            return False
        report = self.view.reports.get(host)
        behind = self.queues is not None and (report is None or report.queues_version != self.queues_version)
        return self.socket.send(peer.routing_id, ManagerFrame(
            manager_pid=self.manager_pid, slots=slots, queues=self.queues if behind else None,
            queues_version=self.queues_version if behind else ""))

    # What the planner and the history read

    def alive_hosts(self) -> list[str]:
        return sorted(p.host for p in self.peers.alive())

    def current_map(self, alive: list[str]) -> SlotMap:
        return SlotMap(hosts={h: self.view.assigned.get(h, {}) for h in alive})

    def host_rows(self, now: float) -> list[tuple[HostReport, bool]]:
        """Each known host's last report and whether it is alive; hosts lost long ago drop out."""
        rows: list[tuple[HostReport, bool]] = []
        for peer in self.peers.all():
            report = self.view.reports.get(peer.host)
            alive = peer.state is MasterState.ALIVE
            if report is not None and (alive or now - peer.last_heard_at < FORGET_LOST_AFTER_S):
                rows.append((report, alive))
        return sorted(rows, key=lambda row: row[0].host)
