"""The active manager's loop: master heartbeats in, slot maps out, a plan every interval, history in SQL.

    while not stopping:                  # now = time.monotonic(), once per turn
        take master reports (wait until the next thing is due)
        expire(now)                      # masters silent for liveness intervals -> lost, re-plan
        send_heartbeats(now)             # each live master gets its part of the map
        maybe_plan(now)                  # queue stats + reports -> planner -> maps, rows
        maybe_prune(now); check the lease
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sqlalchemy.exc import SQLAlchemyError

from config.models import ClusterConfig, QueueConfig
from manager import planner
from manager.failures import failed_attempts, failure_events
from manager.heartbeat import ADOPT, GONE, Change, MasterState, PeerChange, Peers
from manager.leader import Lease
from manager.link import ManagerSocket, Received
from manager.model import HostCapacity, Move, Plan, SlotMap
from manager.placement import slot_number
from manager.stats import WorkWindow, settings_in_force, with_batch_sizes
from manager.store import (
    EventKind,
    NewEvent,
    Override,
    Store,
    apply_overrides,
    event_row,
    host_samples,
    queue_samples,
    slot_map_rows,
)
from master.lifecycle import SERVING
from master.manager_frames import BACKOFF_MAX_INTERVALS, ManagerFrame
from master.report import HostReport, QueueSettingsReport
from queue_server.client import QueueClient
from queue_server.protocol.client_errors import QueueServerError
from queue_server.protocol.replies import QueueStats as ServerQueueStats

log = logging.getLogger(__name__)

LEASE_CHECK_S = 1.0
PRUNE_EVERY_S = 600.0
# How long a lost host still shows in host samples before the manager forgets it.
FORGET_LOST_AFTER_S = 3600.0
EXIT_LEASE_LOST = 3
# A spoofed report for a host is logged at most this often per host.
SPOOF_LOG_EVERY_S = 10.0
MAX_BACKOFF_INTERVALS = BACKOFF_MAX_INTERVALS


class QueueStatsReader:
    """STATS from the queue server (TOTAL per queue for a server without STATS)."""

    def __init__(self, client: QueueClient) -> None:
        self.client = client
        self.has_stats = True

    def read(self, queues: Mapping[str, QueueConfig]) -> dict[str, ServerQueueStats]:
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


@dataclass(slots=True)
class Schedule:
    """When each periodic duty is due next (monotonic seconds)."""

    first_plan_at: float
    plan_at: float
    # Until the first plan: hosts alive in the last stored history, and how long to wait
    # for them (masters in reconnect backoff come back within liveness + 32 intervals).
    expected_hosts: frozenset[str] = frozenset()
    expected_until: float = float("-inf")
    heartbeat_at: float = float("-inf")
    lease_check_at: float = float("-inf")
    prune_at: float = float("-inf")
    last_plan_at: float | None = None


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


def change_event(change: PeerChange, report: HostReport | None) -> NewEvent:
    slots = len(report.slots) if report is not None else 0
    texts = {
        Change.JOINED: (EventKind.MASTER_JOINED, f"master {change.host} joined with {slots} slots"),
        Change.BACK: (EventKind.MASTER_BACK,
                      f"master {change.host} is back after {change.silent_s:.1f} s with {slots} slots"),
        Change.RESTARTED: (EventKind.MASTER_RESTARTED, f"master {change.host} restarted"),
        Change.LOST: (EventKind.MASTER_LOST,
                      f"master {change.host} silent for {change.silent_s:.1f} s: its slots are re-planned"),
        Change.LEFT: (EventKind.MASTER_LEFT, f"master {change.host} is stopping: its slots are re-planned"),
    }
    kind, message = texts[change.change]
    return NewEvent(kind=kind, message=message, host=change.host)


def moves_events(plan: Plan) -> list[NewEvent]:
    """One event per queue a plan moved slots of, so the dashboard can filter by queue."""
    touched: dict[str, list[Move]] = {}
    for move in plan.moves:
        for queue in {move.to_queue, move.from_queue} - {None}:
            touched.setdefault(queue, []).append(move)  # type: ignore[arg-type]
    events = []
    for queue, moves in sorted(touched.items()):
        gained = sum(1 for m in moves if m.to_queue == queue)
        lost = len(moves) - gained
        kinds = sorted({str(m.kind) for m in moves})
        events.append(NewEvent(
            kind=EventKind.SLOTS_MOVED,
            queue=queue,
            message=f"{queue}: {gained - lost:+d} slots ({gained} in, {lost} out; {', '.join(kinds)})",
            detail={
                "gained": gained,
                "lost": lost,
                "moves": [
                    {"kind": str(m.kind), "host": m.host, "slot": m.slot_id,
                     "from": m.from_queue, "to": m.to_queue}
                    for m in moves[:200]
                ],
            },
        ))
    return events


def override_events(seen: Mapping[str, float], overrides: Mapping[str, Override]) -> list[NewEvent]:
    """One event per override that is new or changed since the last plan."""
    events = []
    for name, override in sorted(overrides.items()):
        if seen.get(name) == override.updated_at_unix:
            continue
        parts = ["paused" if override.paused else "running"]
        if override.min_slots is not None:
            parts.append(f"min {override.min_slots}")
        if override.max_slots is not None:
            parts.append(f"max {override.max_slots}")
        events.append(NewEvent(
            kind=EventKind.OVERRIDE_APPLIED, queue=name, actor="admin",
            message=f"queue {name}: override applied ({', '.join(parts)})",
            detail={"paused": override.paused, "min_slots": override.min_slots,
                    "max_slots": override.max_slots},
        ))
    return events


class Manager:
    def __init__(
        self,
        config: ClusterConfig,
        *,
        store: Store,
        socket: ManagerSocket,
        stats_reader: QueueStatsReader,
        lease: Lease,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.settings = config.manager
        self.store = store
        self.socket = socket
        self.stats_reader = stats_reader
        self.lease = lease
        self.clock = clock
        self.wall_clock = wall_clock
        self.stopping = False
        self.pid = os.getpid()
        now = clock()
        interval_s = self.settings.heartbeat_interval_s
        self.peers = Peers(interval_s=interval_s, liveness=self.settings.heartbeat_liveness)
        # Plan first only when every live master had time to report: the map is rebuilt
        # from what they run, not invented from nothing.
        grace_s = self.peers.timeout_s
        self.schedule = Schedule(
            first_plan_at=now + grace_s,
            plan_at=now + grace_s,
            expected_hosts=frozenset(self.recent_hosts()),
            expected_until=now + grace_s + interval_s * MAX_BACKOFF_INTERVALS,
        )
        self.view = View()
        self.work = WorkWindow(
            window_s=self.settings.stats_window_s, max_gap_s=self.peers.timeout_s, started_at=now
        )
        # Events with the unix time they happened, written at the end of the loop turn.
        self.events: list[tuple[float, NewEvent]] = []
        self.overrides_seen: dict[str, float] = {}
        self.server_stats: dict[str, ServerQueueStats] = {}
        self.server_stats_read = False
        # Failed attempts per queue between the last two STATS reads (None: no baseline yet).
        self.failed_since_plan: dict[str, int] | None = None
        self.server_down = False
        self.spoof_logged_at: dict[str, float] = {}
        self.bound_seen_at: dict[str, float] = {}

    def run(self) -> int:
        self.note(NewEvent(
            kind=EventKind.MANAGER_ACTIVE,
            message=f"manager {self.pid} is active ({self.lease.description}), listening on {self.socket.endpoint}",
        ))
        while not self.stopping:
            for received in self.socket.receive(self.wait_s(self.clock())):
                self.on_frame(received, self.clock())
            now = self.clock()
            self.expire(now)
            self.send_heartbeats(now)
            self.maybe_plan(now)
            self.maybe_prune(now)
            if self.events:
                self.flush()
            if not self.check_lease(now):
                log.error("the leadership lock is gone: stopping so that only one manager acts")
                return EXIT_LEASE_LOST
        log.info("manager stopped")
        return 0

    def wait_s(self, now: float) -> float:
        due = min(
            self.schedule.heartbeat_at,
            self.schedule.plan_at,
            self.schedule.lease_check_at,
            self.peers.next_expiry(),
        )
        return max(0.0, min(due - now, self.settings.heartbeat_interval_s))

    # Masters

    def on_frame(self, received: Received, now: float) -> None:
        frame = received.frame
        report = frame.report
        if not self.from_its_connection(received, now):
            return
        change = self.peers.on_report(
            report.host, routing_id=received.routing_id, master_pid=report.master_pid, now=now,
            leaving=frame.leaving,
        )
        if frame.leaving:
            self.view.reports[report.host] = report
            if change is not None:
                self.on_change(change, now)
            return
        if change is not None and change.change in ADOPT:
            self.work.forget(report.host)
        self.view.reports[report.host] = report
        self.work.on_report(report, now)
        if change is not None:
            self.on_change(change, now)

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
        if now - self.bound_seen_at.get(host, float("-inf")) >= self.settings.heartbeat_interval_s:
            if not self.send_part(host):
                return True
            self.bound_seen_at[host] = now
        self.refuse(received, now, f"the host is alive on connection {bound.hex()} (turn on CURVE "
                                   "to authenticate masters)")
        return False

    def refuse(self, received: Received, now: float, why: str) -> None:
        host = received.frame.report.host
        if now - self.spoof_logged_at.get(host, float("-inf")) >= SPOOF_LOG_EVERY_S:
            self.spoof_logged_at[host] = now
            log.warning("refused a %s for host %s from connection %s: %s; the report is dropped",
                        "leaving" if received.frame.leaving else "report", host,
                        received.routing_id.hex(), why)

    def on_change(self, change: PeerChange, now: float) -> None:
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
        self.note(event)
        self.request_plan(now)

    def expire(self, now: float) -> None:
        for change in self.peers.expire(now):
            self.on_change(change, now)

    def send_heartbeats(self, now: float) -> None:
        if now < self.schedule.heartbeat_at:
            return
        self.schedule.heartbeat_at = now + self.settings.heartbeat_interval_s
        for peer in list(self.peers.alive()):
            self.send_part(peer.host)

    def send_part(self, host: str) -> bool:
        """False when the host's connection is gone."""
        if host in self.view.planned:
            return self.peer_send(host, slots=host_part(host, self.view.assigned.get(host, {})))
        return self.peer_send(host, slots=None)

    def peer_send(self, host: str, *, slots: dict[int, str] | None) -> bool:
        peer = self.peers.get(host)
        if peer is None:
            return False
        return self.socket.send(peer.routing_id, ManagerFrame(manager_pid=self.pid, slots=slots))

    # Planning

    def request_plan(self, now: float) -> None:
        self.schedule.plan_at = min(self.schedule.plan_at, max(now, self.schedule.first_plan_at))

    def maybe_plan(self, now: float) -> None:
        if now < self.schedule.plan_at:
            return
        self.schedule.plan_at = now + self.settings.plan_interval_s
        if self.schedule.last_plan_at is None and not self.all_expected_here(now):
            return
        try:
            self.plan(now)
        except Exception:  # the loop boundary: heartbeats must go on whatever a plan hits
            log.exception("planning failed; masters keep their last map, next try in %.1f s",
                          self.settings.plan_interval_s)

    def plan(self, now: float) -> Plan:
        at_unix = self.wall_clock()
        overrides = self.read_overrides()
        queues = apply_overrides(self.config.queues, overrides)
        self.read_queue_server(queues)
        waiting = {name: s.ready for name, s in self.server_stats.items()}
        alive = sorted(p.host for p in self.peers.alive())
        hosts = [HostCapacity(h, self.view.reports[h].capacity) for h in alive]
        current = SlotMap(hosts={h: self.view.assigned.get(h, {}) for h in alive})
        in_force = settings_in_force(self.view.reports[h] for h in alive)
        # The planner counts batches with the batch size the slots use, not the config's default.
        result = planner.plan(
            current, with_batch_sizes(queues, in_force), self.work.queue_stats(now, waiting), hosts,
            target_load=self.settings.target_load,
        )
        self.view.assigned = {h: dict(slots) for h, slots in result.slot_map.hosts.items()}
        self.view.planned = set(alive)
        for host in alive:
            self.send_part(host)
        self.schedule.heartbeat_at = now + self.settings.heartbeat_interval_s
        for moved in moves_events(result):
            log.info("%s", moved.message)
            self.note(moved)
        self.record_plan(now, at_unix, result, queues, overrides, in_force)
        self.schedule.last_plan_at = now
        return result

    def all_expected_here(self, now: float) -> bool:
        """Before the first plan: have the hosts of the last stored history reported (or has
        their time run out)? Planning without them would put their work elsewhere."""
        missing = self.schedule.expected_hosts - {p.host for p in self.peers.alive()}
        if not missing or now >= self.schedule.expected_until:
            return True
        log.info("first plan waits for %s (at most %.0f s more)",
                 ", ".join(sorted(missing)), self.schedule.expected_until - now)
        self.schedule.plan_at = min(self.schedule.plan_at, self.schedule.expected_until)
        return False

    def recent_hosts(self) -> set[str]:
        try:
            return self.store.recent_hosts()
        except SQLAlchemyError as exc:
            log.warning("cannot read the last known hosts (%s); planning after the grace period", exc)
            return set()

    def read_overrides(self) -> dict[str, Override]:
        try:
            overrides = self.store.overrides()
        except SQLAlchemyError as exc:
            log.error("cannot read queue overrides (%s); planning without them", exc)
            return {}
        for event in override_events(self.overrides_seen, overrides):
            log.info("%s", event.message)
            self.note(event)
        self.overrides_seen = {name: o.updated_at_unix for name, o in overrides.items()}
        return overrides

    def read_queue_server(self, queues: Mapping[str, QueueConfig]) -> None:
        # None until a read succeeded: no baseline (an empty dict is a server with no queues yet).
        previous = self.server_stats if self.server_stats_read else None
        try:
            self.server_stats = self.stats_reader.read(queues)
        except QueueServerError as exc:
            if not self.server_down:
                log.warning("queue server stats unavailable (%s); planning on the last figures", exc)
                self.note(NewEvent(
                    kind=EventKind.QUEUE_SERVER_UNREACHABLE,
                    message=f"queue server stats unavailable ({exc}); planning on the last figures",
                ))
            self.server_down = True
            self.failed_since_plan = None  # unknown: the slots' errors stand in
            return
        self.server_down = False
        self.server_stats_read = True
        self.failed_since_plan = failed_attempts(previous, self.server_stats)
        for event in failure_events(previous, self.server_stats):
            self.note(event)

    def record_plan(
        self, now: float, at_unix: float, plan: Plan, queues: Mapping[str, QueueConfig],
        overrides: Mapping[str, Override], in_force: Mapping[str, QueueSettingsReport],
    ) -> None:
        last = self.schedule.last_plan_at
        interval_s = now - last if last is not None else self.work.effective_window_s(now)
        rows: list[object] = []
        rows += queue_samples(
            at_unix=at_unix, plan=plan, queues=queues,
            paused=[name for name, o in overrides.items() if o.paused],
            window=self.work.totals(now), window_s=self.work.effective_window_s(now),
            interval=self.work.totals(now, since=last if last is not None else now - interval_s),
            interval_s=interval_s, server=self.server_stats, failed=self.failed_since_plan,
            in_force=in_force,
        )
        rows += host_samples(at_unix=at_unix, reports=self.host_rows(now))
        rows += slot_map_rows(at_unix=at_unix, slot_map=plan.slot_map)
        self.flush(rows)

    def host_rows(self, now: float) -> list[tuple[HostReport, bool]]:
        rows: list[tuple[HostReport, bool]] = []
        for peer in self.peers.all():
            report = self.view.reports.get(peer.host)
            alive = peer.state is MasterState.ALIVE
            if report is not None and (alive or now - peer.last_heard_at < FORGET_LOST_AFTER_S):
                rows.append((report, alive))
        return sorted(rows, key=lambda row: row[0].host)

    def note(self, event: NewEvent) -> None:
        self.events.append((self.wall_clock(), event))

    def flush(self, rows: list[object] | None = None) -> None:
        """Write rows and pending events in one transaction; a database outage loses
        this interval's history, never the loop."""
        events, self.events = self.events, []
        try:
            self.store.write([*(rows or []), *(event_row(at, e) for at, e in events)])
        except SQLAlchemyError as exc:
            log.error("cannot store history (%s); this interval is lost, planning goes on", exc)

    # Upkeep

    def maybe_prune(self, now: float) -> None:
        if now < self.schedule.prune_at:
            return
        self.schedule.prune_at = now + PRUNE_EVERY_S
        try:
            deleted = self.store.prune(
                now_unix=self.wall_clock(), retention_days=self.settings.retention_days
            )
        except SQLAlchemyError as exc:
            log.error("cannot prune old history (%s); trying again in %.0f s", exc, PRUNE_EVERY_S)
            return
        if deleted:
            log.info("pruned %d history rows older than %.1f days", deleted, self.settings.retention_days)

    def check_lease(self, now: float) -> bool:
        if now < self.schedule.lease_check_at:
            return True
        self.schedule.lease_check_at = now + LEASE_CHECK_S
        return self.lease.still_held()

