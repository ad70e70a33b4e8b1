"""The active manager's loop: master heartbeats in, slot maps out, a plan every interval, history in SQL.

    while not stopping:                  # now = time.monotonic(), once per turn
        take master reports (wait until the next thing is due)
        expire(now)                      # masters silent for liveness intervals -> lost, re-plan
        send_heartbeats(now)             # each live master gets its part of the map
        maybe_plan(now)                  # queue stats + reports -> planner -> maps, rows
        maybe_prune(now); check the lease

The masters' side is manager/hosts/masters.py, the plan's other inputs manager/planning/plan_inputs.py,
the history writes manager/storage/history.py; this module only schedules them.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError

from config.models import ClusterConfig
from config.periodic import TurnBoundary
from manager.events.cancel_events import CancelEvents, position_in_store
from manager.events.event_builders import moves_events
from manager.failover.leader import Lease
from manager.hosts.link import ManagerSocket
from manager.hosts.live import LiveWriter, live_counts
from manager.hosts.masters import Masters
from manager.planning import burst, planner
from manager.planning.job_times import JobTimeMemory
from manager.planning.minimum_room import host_capacities
from manager.planning.plan_guard import Checked, check_inputs
from manager.planning.plan_inputs import OverrideReader, QueueStatsReader, ServerFigures
from manager.planning.stabilise import RecentPlans
from manager.planning.timetable import Schedule
from manager.reloading.config_reload import ConfigReloader, reload_events
from manager.reloading.pulsar_limits import limits_changed, send_limits
from manager.reloading.reload_requests import take_reload_requests
from manager.storage.history import History
from manager.storage.model import HostCapacity, Plan, QueueStats
from manager.storage.stats import settings_in_force, with_batch_sizes
from manager.storage.store import EventKind, NewEvent, Store, apply_overrides
from master.manager_frames import BACKOFF_MAX_INTERVALS
from queue_server.protocol.client_errors import QueueServerError

log = logging.getLogger(__name__)

LEASE_CHECK_S = 1.0
# How often the database is asked for reload requests (the API's, the CLI's).
REQUESTS_EVERY_S = 1.0
PRUNE_EVERY_S = 600.0
EXIT_LEASE_LOST = 3
# After a turn that raised: a socket that keeps failing must not spin the loop, and heartbeats
# (every heartbeat_interval_s, 1 s by default) must not wait long.
FAILED_TURN_PAUSE_S = 0.1
MAX_BACKOFF_INTERVALS = BACKOFF_MAX_INTERVALS


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
        self.socket = socket
        self.lease = lease
        self.clock = clock
        self.wall_clock = wall_clock
        self.stopping = False
        # Set by manager/cli.py: SIGHUP's flag and the file; the schedules' new rules go to
        # on_reload (the schedule thread), the queues' to the next plan.
        self.reloader: ConfigReloader | None = None
        self.on_reload: Callable[[ClusterConfig], None] | None = None
        self.engine = store.engine  # reload requests from the API and the CLI (manager_requests)
        self.requests_at = float("-inf")
        self.requests_failing = False
        self.lease_check_s = LEASE_CHECK_S  # shorter while the sentinel runs (manager/cli.py)
        self.pid = os.getpid()
        now = clock()
        interval_s = self.settings.heartbeat_interval_s
        self.masters = Masters(
            socket, interval_s=interval_s, liveness=self.settings.heartbeat_liveness,
            stats_window_s=self.settings.stats_window_s, manager_pid=self.pid, now=now,
            max_hosts=self.settings.max_hosts,
        )
        self.history = History(store, wall_clock=wall_clock)
        # The queue server's waiting counts at the last plan: a burst is measured from them.
        self.waiting_at_plan: dict[str, int] = {}
        # The last full plan's counts: a burst plan takes slots above them (spares) first.
        self.last_planned: dict[str, int] = {}
        # Full plans' counts: the spare cut stops no slot below a queue's recent highest.
        self.recent_plans = RecentPlans()
        # Job times past the window: a burst into a queue idle for minutes is planned on
        # them, not on "one slot to learn from" (issue 28).
        self.job_times = JobTimeMemory()
        self.job_times.seed(self.history.last_job_times())  # what the last manager measured
        # What runs now, for the dashboard, between the plans' samples (issue 28).
        self.live = LiveWriter(store.replace_live, wall_clock=wall_clock)
        self.server = ServerFigures(stats_reader, CancelEvents(lambda ring: position_in_store(store, ring)))
        self.overrides = OverrideReader(store)
        self.rejected_inputs: set[str] = set()
        self.turns = TurnBoundary("the manager's turn", log=log,
                                  next_turn=f"the next in {FAILED_TURN_PAUSE_S:g} s (masters keep their last map)")
        # Plan first only when every live master had time to report: the map is rebuilt
        # from what they run, not invented from nothing.
        grace_s = self.masters.peers.timeout_s
        self.schedule = Schedule(
            first_plan_at=now + grace_s,
            plan_at=now + grace_s,
            expected_hosts=frozenset(self.history.recent_hosts()),
            expected_until=now + grace_s + interval_s * MAX_BACKOFF_INTERVALS,
        )

    def run(self) -> int:
        self.note(NewEvent(
            kind=EventKind.MANAGER_ACTIVE,
            message=f"manager {self.pid} is active ({self.lease.description}), listening on {self.socket.endpoint}",
        ))
        while not self.stopping:
            with self.turns:
                self.turn()
            if self.turns.failures:
                time.sleep(FAILED_TURN_PAUSE_S)
            # Outside the boundary: a lease that cannot be checked must stop this manager.
            if not self.check_lease(self.clock()):
                log.error("the leadership lock is gone: stopping so that only one manager acts")
                self.stopping = True  # the sentinel stops granting leases at once
                return EXIT_LEASE_LOST
        log.info("manager stopped")
        return 0

    def turn(self) -> None:
        self.maybe_take_requests(self.clock())
        if self.reloader is not None and self.reloader.requested:
            self.reload_config(self.clock())
        frames = self.socket.receive(self.wait_s(self.clock()))
        self.masters.listened(self.clock())
        for received in frames:
            at = self.clock()
            self.on_master_events(self.masters.on_frame(received, at), at)
        self.note_refusals()
        for told in self.masters.take_report_events():
            self.note(told)
        now = self.clock()
        self.on_master_events(self.masters.expire(now), now)
        self.send_heartbeats(now)
        self.maybe_plan(now)
        self.maybe_plan_burst(now)
        self.maybe_write_live(now)
        self.maybe_prune(now)
        if self.history.events:
            self.history.flush()

    def maybe_take_requests(self, now: float) -> None:
        """A reload asked through the database (another host's CLI or dashboard): as SIGHUP."""
        if self.reloader is None or now < self.requests_at:
            return
        self.requests_at = now + REQUESTS_EVERY_S
        try:
            doors = take_reload_requests(self.engine, now_unix=self.wall_clock())
        except SQLAlchemyError as exc:  # the database away: the turn (heartbeats) goes on
            if not self.requests_failing:
                log.warning("cannot read reload requests (%s); trying every %.0f s", exc, REQUESTS_EVERY_S)
            self.requests_failing = True
            return
        self.requests_failing = False
        if doors:
            log.info("config reload asked (%s)", ", ".join(sorted(set(doors))))
            self.reloader.requested = True

    def reload_config(self, now: float) -> None:
        """SIGHUP: the file read and validated first; a bad one changes nothing and says why."""
        assert self.reloader is not None
        reloaded = self.reloader.reload(self.config)
        sent = None
        if reloaded.config is not None:
            if limits_changed(self.config, reloaded.config):
                sent = send_limits(reloaded.config)
            self.config = reloaded.config
            self.masters.queue_settings(reloaded.config.queues)  # with every map from now on
            if self.on_reload is not None:
                self.on_reload(reloaded.config)
            self.request_plan(now)
        for event in reload_events(reloaded, sent):
            self.note(event)

    def wait_s(self, now: float) -> float:
        due = min(
            self.schedule.heartbeat_at,
            self.schedule.plan_at,
            self.schedule.burst_check_at if self.settings.burst_check_s > 0 else float("inf"),
            self.schedule.lease_check_at,
            self.live.due_at,
            self.masters.peers.next_expiry(),
        )
        return max(0.0, min(due - now, self.settings.heartbeat_interval_s))

    def note(self, event: NewEvent) -> None:
        self.history.note(event)

    # Masters

    def on_master_events(self, events: list[NewEvent], now: float) -> None:
        """A master joined, came back, restarted, left or was lost: recorded, and re-planned."""
        for event in events:
            self.note(event)
            self.request_plan(now)

    def note_refusals(self) -> None:
        """Frames refused at the door since the last turn: one event per logged line."""
        for note in self.socket.refusals.take_notes():
            self.note(NewEvent(kind=EventKind.PEER_REFUSED, message=note.message,
                               detail={"reason": note.reason, "count": note.count, "total": note.total}))

    def send_heartbeats(self, now: float) -> None:
        if now < self.schedule.heartbeat_at:
            return
        self.schedule.heartbeat_at = now + self.settings.heartbeat_interval_s
        self.masters.send_heartbeats()

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
        overrides, override_events = self.overrides.read()
        for event in override_events:
            self.note(event)
        queues = apply_overrides(self.config.queues, overrides)
        for event in self.server.read(queues):
            self.note(event)
        masters = self.masters
        alive = masters.alive_hosts()
        in_force = settings_in_force(masters.view.reports[h] for h in alive)
        waiting = self.server.waiting()
        checked = self.checked_inputs(
            self.job_times.fill(masters.work.queue_stats(now, waiting)),
            host_capacities(masters.view.reports, alive, queues, in_force, waiting),
        )
        # The planner counts batches with the batch size the slots use, not the config's default.
        result = planner.plan(
            masters.current_map(alive), with_batch_sizes(queues, in_force), checked.stats,
            checked.hosts, target_load=self.settings.target_load,
            full_window_s=self.settings.stats_window_s, keep=self.recent_plans.keep(now),
        )
        if planner.window_seen(checked.stats, self.settings.stats_window_s):
            # Not before: counts planned on seconds of stats would hold slots for minutes.
            self.recent_plans.record(now, result)
        masters.take_plan(result.slot_map, alive)
        self.schedule.heartbeat_at = now + self.settings.heartbeat_interval_s
        for moved in moves_events(result):
            log.info("%s", moved.message)
            self.note(moved)
        self.waiting_at_plan = burst.settled_waiting(self.waiting_at_plan, waiting, checked.stats)
        self.last_planned = result.planned_counts()
        self.history.record_plan(
            now=now, at_unix=at_unix, last_plan_at=self.schedule.last_plan_at, plan=result,
            queues=queues, overrides=overrides, in_force=in_force, work=masters.work,
            server=self.server.stats, failed=self.server.failed_since_plan,
            hosts=masters.host_rows(now),
        )
        self.schedule.last_plan_at = now
        return result

    def checked_inputs(self, stats: dict[str, QueueStats], hosts: list[HostCapacity]) -> Checked:
        """The plan's inputs through manager/planning/plan_guard.py: a bad figure is logged (when
        the set of bad figures changes, not every plan) and costs only its queue or host."""
        checked = check_inputs(stats, hosts)
        if checked.rejected and set(checked.rejected) != self.rejected_inputs:
            log.error("unsound planner inputs, replaced: %s",
                      "; ".join(f"{what}: {why}" for what, why in checked.rejected.items()))
        self.rejected_inputs = set(checked.rejected)
        return checked

    def maybe_plan_burst(self, now: float) -> None:
        """Between plans: a queue whose backlog appeared or jumped is planned for at once."""
        if self.settings.burst_check_s <= 0 or now < self.schedule.burst_check_at:
            return
        self.schedule.burst_check_at = now + self.settings.burst_check_s
        if self.schedule.last_plan_at is None or now >= self.schedule.plan_at:
            return  # the full plan comes first (or is due now)
        try:
            self.plan_burst(now)
        except Exception:  # the loop boundary: heartbeats must go on whatever a plan hits
            log.exception("burst planning failed; the next full plan is in %.1f s",
                          self.schedule.plan_at - now)

    def plan_burst(self, now: float) -> Plan | None:
        queues = apply_overrides(self.config.queues, self.overrides.last)
        try:
            # Read apart from the plan's figures: their failure counts run from plan to plan.
            read = self.server.reader.read(queues)
            waiting = {name: s.ready for name, s in read.items()}
        except QueueServerError:
            return None  # the full plan says so (once)
        masters = self.masters
        alive = masters.alive_hosts()
        current = masters.current_map(alive)
        found = burst.bursting(self.waiting_at_plan, waiting, queues, current.counts())
        if not found:
            return None
        idle = [name for name, s in read.items() if s.ready == 0 and s.running == 0]
        # Queues with jobs and no slot burst at every check; with every slot held by busy
        # queues of their priority or higher, the plan would move nothing. Checked before
        # the settings in force are read from every report (860 ms at 100 hosts of 10,000
        # queues): every queue counted as handled, the capacities are at least the plan's.
        room = host_capacities(masters.view.reports, alive, queues, queues, waiting)
        if not burst.anything_to_take(current, queues, room, found, last_planned=self.last_planned, idle=idle):
            return None
        in_force = settings_in_force(masters.view.reports[h] for h in alive)
        checked = self.checked_inputs(
            self.job_times.fill(masters.work.queue_stats(now, waiting)),
            host_capacities(masters.view.reports, alive, queues, in_force, waiting),
        )
        result = burst.plan_burst(
            current, with_batch_sizes(queues, in_force), checked.stats, checked.hosts, found,
            target_load=self.settings.target_load, last_planned=self.last_planned, idle=idle,
        )
        if not result.moves:
            # Nothing to move yet (no job time known, no donor): looked at again next check.
            return result
        # Measured from here on: one burst makes one plan however long its puts go on. Every
        # queue's count, measured or not: a queue left unsettled stayed among the bursting,
        # and no other burst could take its slots (bench/planner_burst.py: low, unmeasured,
        # held its 8 slots against burst's 4,000 jobs for 3.4 s).
        self.waiting_at_plan = waiting
        # The burst's new slots are planned ones, not spares another burst could take.
        self.last_planned.update(result.planned_counts())
        masters.take_plan(result.slot_map, alive)
        masters.send_heartbeats()  # the masters get the map now, not at the next beat
        self.schedule.heartbeat_at = now + self.settings.heartbeat_interval_s
        log.info("burst in %s: %d moves", ", ".join(found), len(result.moves))
        for moved in moves_events(result):
            self.note(moved)
        return result

    def all_expected_here(self, now: float) -> bool:
        """Before the first plan: have the hosts of the last stored history reported (or has
        their time run out)? Planning without them would put their work elsewhere."""
        missing = self.schedule.expected_hosts - set(self.masters.alive_hosts())
        if not missing or now >= self.schedule.expected_until:
            return True
        log.info("first plan waits for %s (at most %.0f s more)",
                 ", ".join(sorted(missing)), self.schedule.expected_until - now)
        self.schedule.plan_at = min(self.schedule.plan_at, self.schedule.expected_until)
        return False

    def maybe_write_live(self, now: float) -> None:
        """The slots running per queue, from the masters' last reports, for the dashboard."""
        masters = self.masters
        alive = masters.alive_hosts()
        self.live.maybe_write(
            now, lambda: live_counts(masters.view.reports, masters.view.assigned, alive),
            lambda: max((now - peer.last_heard_at for peer in masters.peers.alive()), default=0.0),
        )

    # Upkeep

    def maybe_prune(self, now: float) -> None:
        if now < self.schedule.prune_at:
            return
        self.schedule.prune_at = now + PRUNE_EVERY_S
        self.history.prune(retention_days=self.settings.retention_days, retry_in_s=PRUNE_EVERY_S)

    def check_lease(self, now: float) -> bool:
        if now < self.schedule.lease_check_at:
            return True
        self.schedule.lease_check_at = now + self.lease_check_s
        return self.lease.still_held()
