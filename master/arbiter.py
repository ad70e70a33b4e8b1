"""The master's loop: preload handlers, fork slots, watch their beacons, reap, kill, reconcile.

    while not stopping:                 # now = time.monotonic(), once per tick
        wait for beacons, a signal or a manager frame    # handlers only enqueue
        dispatch signals; take beacons and lease notes; reap()   # a dead slot's batch: settled
        kill_hung(now)                  # silent, batch past its timeout, over the hard limit
        renew leases                    # TOUCH the batches of live slots (lease keeper thread)
        reconcile(now)                  # desired slot map vs running slots; idempotent
        refresh capacity; write report

Beside it: signals (master/signal_queue.py), sizing by PSS (master/sizing.py), what a slot of
a queue is told (master/assignments.py), slot states (master/lifecycle.py), the wanted map
(master/reconciler.py), fork and reap (master/supervisor.py).
"""
from __future__ import annotations

import gc
import logging
import os
import random
import signal
import time
from collections import Counter as Tally
from collections.abc import Iterable
from pathlib import Path

import zmq

from config.curve import client_curve
from config.errors import ConfigError
from config.load import load_config
from config.models import ClusterConfig
from config.periodic import TurnBoundary
from config.tokens import role_token
from master import host
from master.assignments import assignment_for, queue_settings
from master.deaths import Deaths
from master.lease_keeper import LeaseKeeper
from master.leases import LeasePipes, Note, renewals
from master.lifecycle import (
    ALIVE,
    SERVING,
    Action,
    Beaconed,
    Count,
    Counter,
    Exited,
    Limits,
    Log,
    SendSignal,
    SettleJobs,
    Slot,
    SlotEvent,
    SlotState,
    StopRequested,
    check,
    on_event,
)
from master.link import MasterLink
from master.reconciler import Reconciler, Retarget, SlotAssignment, SlotCounts, Spawn, Stop, changes
from master.report import HostReport, build_report
from master.settle import ReplyTo, Settlement, settle
from master.signal_queue import SignalQueue
from master.sizing import Sizing
from master.supervisor import Reaped, open_sockets, reap, send_signal, spawn
from master.zmq_router import rewatch
from queue_server.client import QueueClient
from slot.beacon import Assignment
from slot.discovery import LoadedHandlers, load_handlers
from slot.outcomes import handler_policy
from slot.permits import limiters_of
from slot.process import SlotSpec, run_slot

log = logging.getLogger(__name__)

TICK_S = 0.05
# At exit, how long the lease keeper may take to send the last failures.
KEEPER_CLOSE_S = 5.0


class Master:
    def __init__(
        self,
        config: ClusterConfig,
        *,
        report_path: Path | None = None,
        report_interval_s: float = 1.0,
        config_path: Path | None = None,
    ) -> None:
        self.config = config
        self.config_path = config_path
        self.master_config = config.master
        self.report_path = report_path
        self.report_interval_s = report_interval_s
        self.host = host.host_name(config.master.host_name)
        self.limits = Limits(
            beacon_interval_s=config.master.beacon_interval_ms / 1000,
            hung_after_beacons=config.master.hung_after_beacons,
            hard_memory_limit_bytes=config.master.hard_memory_limit_bytes,
        )
        self.slots: dict[int, Slot] = {}
        self.counters: Tally[Counter] = Tally()
        self.deaths = Deaths()
        self.stopping = False
        self.loaded = LoadedHandlers(handlers={}, failures={})
        self.reconciler = Reconciler(handled_queues=frozenset())
        self.sizing = Sizing(config.master)
        self.signals = SignalQueue()
        self._report_at = float("-inf")
        self.tick_turns = TurnBoundary("the master's tick", next_turn=f"the next tick in {TICK_S:g} s", log=log)
        self.report_turns = TurnBoundary(f"writing the report file {report_path}", log=log,
                                         next_turn=f"the slots go on; tried again in {report_interval_s:g} s")
        self._warned_unhandled: set[str] = set()
        # The worker role's (least privilege, docs/SECURITY.md "Roles"): its slots and lease
        # keeper take, finish and put jobs; $SLOTMAP_QUEUE_TOKEN(_FILE), else the role's file,
        # else the one admin token.
        try:
            self.queue_token = role_token(config.queue_server, "worker")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.leases = LeasePipes()
        self.keeper = LeaseKeeper(self._queue_client)
        self.rng = random.Random()
        self.slot_sockets = open_sockets()

    # Start-up

    def preload(self) -> LoadedHandlers:
        """Import every handler module, then freeze the GC so forks keep sharing those pages
        (a collection would write to every object header and copy the pages)."""
        self.loaded = load_handlers(self.master_config.handler_modules)
        self.reconciler = Reconciler(
            handled_queues=frozenset(self.loaded.handlers),
            priorities={name: q.priority for name, q in self.config.queues.items()},
            desired=self.reconciler.desired,
        )
        gc.collect()
        gc.freeze()
        # Sockets opened from now on are the master's own: no slot keeps them (drop_sockets).
        self.slot_sockets = open_sockets()
        log.info(
            "preloaded handlers for %s%s",
            ", ".join(sorted(self.loaded.handlers)) or "no queue",
            f"; failed: {', '.join(self.loaded.failures)}" if self.loaded.failures else "",
        )
        return self.loaded

    def apply_slot_map(self, desired: SlotCounts | SlotAssignment) -> None:
        """The static map now; the manager's assignments later (slot id -> queue)."""
        self.reconciler.apply_slot_map(desired)

    def run(self) -> int:
        if not self.loaded.handlers and not self.loaded.failures:
            self.preload()
        self.link = MasterLink(self.master_config.ipc_dir,
                               max_beacon_bytes=self.master_config.max_beacon_bytes)
        poller = zmq.Poller()
        poller.register(self.link.socket, zmq.POLLIN)
        poller.register(self.signals.install(), zmq.POLLIN)
        log.info("master %d on %s, slot link %s", os.getpid(), self.host, self.link.endpoint)
        self.keeper.start()
        watched: zmq.Socket[bytes] | None = None
        try:
            while not self.stopping or self.slots:
                watched = rewatch(poller, watched, self.outside_socket())
                poller.poll(int(TICK_S * 1000))
                with self.tick_turns:
                    self.tick(time.monotonic())
        finally:
            self.signals.close()
            self.keeper.close(KEEPER_CLOSE_S)
            self.leases.close_all()
            self.link.close()
        log.info("master stopped: all slots exited")
        return 0

    def outside_socket(self) -> zmq.Socket[bytes] | None:
        """A socket whose frames wake the loop at once (the manager link's); none here."""
        return None

    def tick(self, now: float) -> None:
        for signum in self.signals.take():
            self.dispatch(signum, now)
        for beacon in self.link.receive():
            slot = self.slots.get(beacon.slot_id)
            if slot is not None and slot.pid == beacon.pid:
                self._apply(slot, Beaconed(beacon), now)
        self.take_lease_notes(self.leases.read(), now)
        self.reap(now)
        self.kill_hung(now)
        self.keeper.renew(renewals(self.slots.values(), now))
        self.sizing.refresh(now, self.slots.values())
        if not self.stopping:
            self.reconcile(now)
        self.maybe_report(now)

    # Signals: the handler only enqueues (master/signal_queue.py); dispatch runs in the loop.

    def dispatch(self, signum: int, now: float) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.handle_stop(now)
        elif signum == signal.SIGHUP:
            self.handle_reload()
        # SIGCHLD only wakes the loop: reap() runs every tick anyway.

    def handle_stop(self, now: float) -> None:
        if self.stopping:
            return
        log.info("stopping: SIGTERM to %d slots, SIGKILL after %.1f s",
                 len(self.slots), self.master_config.stop_deadline_s)
        self.stopping = True
        for slot in list(self.slots.values()):
            self._apply(slot, StopRequested(self.master_config.stop_deadline_s), now)

    def handle_reload(self) -> None:
        """SIGHUP: re-read the config; the queues' settings and the static map change in place
        (slots are retargeted, not re-forked). New handler modules need a master restart."""
        if self.config_path is None:
            log.warning("SIGHUP ignored: the master runs on the embedded default config")
            return
        try:
            config = load_config(self.config_path)
        except ConfigError as exc:
            log.error("SIGHUP: %s; keeping the running config", exc)
            return
        if config.master.handler_modules != self.master_config.handler_modules:
            log.warning("SIGHUP: handler_modules changed; restart the master to load them")
        self.config.queues = config.queues
        self.config.master.static_slots = config.master.static_slots
        self.reconciler.priorities = {name: q.priority for name, q in config.queues.items()}
        self.apply_slot_map(config.master.static_slots)
        for slot in self.slots.values():
            queue = slot.assignment.queue
            if slot.state in SERVING and queue in self.loaded.handlers:
                fresh = self.assignment_for(queue)
                if fresh != slot.assignment:
                    self._retarget(slot, fresh, time.monotonic())
        log.info("SIGHUP: config reloaded; static map %s", dict(config.master.static_slots))

    # Children

    def take_lease_notes(self, notes: Iterable[Note], now: float) -> None:
        for note in notes:
            slot = self.slots.get(note.slot_id)
            if slot is not None and note.pid in (None, slot.pid):
                self.deaths.before_note(slot, note.event, now)
                self._apply(slot, note.event, now)
                self.deaths.after_note(slot)

    def reap(self, now: float) -> None:
        for child in reap():
            slot = next((s for s in self.slots.values() if s.pid == child.pid), None)
            if slot is None:
                log.debug("reaped pid %d, not a slot of ours", child.pid)
                continue
            # Everything the slot wrote before it died is in its pipe now.
            self.take_lease_notes(self.leases.read_slot(slot.slot_id), now)
            self._forget(slot, child, now)

    def _forget(self, slot: Slot, child: Reaped, now: float) -> None:
        settled: Settlement | None = None
        for action in on_event(slot, Exited(child.code, child.signal), now):
            if isinstance(action, SettleJobs):
                settled = self.settle_jobs(action)
            else:
                self._perform(action)
        del self.slots[slot.slot_id]
        self.leases.close(slot.slot_id)
        self.deaths.died(slot, child.code, child.signal, settled, now)

    def kill_hung(self, now: float) -> None:
        for slot in list(self.slots.values()):
            event = check(slot, now, self.limits)
            if event is not None:
                self._apply(slot, event, now)

    # The slot map

    def reconcile(self, now: float) -> None:
        serving = {i: s.assignment.queue for i, s in self.slots.items() if s.state in SERVING}
        held = {i for i, s in self.slots.items() if s.state not in SERVING}
        capacity = self.sizing.capacity
        target = self.reconciler.target(serving, capacity=capacity.slots, held_ids=held,
                                        ceiling=min(capacity.by_memory, capacity.max_slots))
        for change in changes(serving, target):
            match change:
                case Stop(slot_id):
                    self._apply(self.slots[slot_id], StopRequested(self.master_config.stop_deadline_s), now)
                case Retarget(slot_id, queue):
                    self._retarget(self.slots[slot_id], self.assignment_for(queue), now)
                case Spawn(slot_id, queue):
                    if slot_id not in self.slots and self.deaths.may_fork(queue, now):
                        self.spawn_slot(slot_id, queue, now)
        self._resend_retargets(now)
        self._warn_unhandled()

    def assignment_for(self, queue: str) -> Assignment:
        return assignment_for(self.config, self.loaded.handlers[queue], queue)

    def spawn_slot(self, slot_id: int, queue: str, now: float) -> None:
        lease_fd = self.leases.open(slot_id)
        spec = SlotSpec(
            slot_id=slot_id,
            assignment=self.assignment_for(queue),
            beacon_endpoint=self.link.endpoint,
            beacon_interval_s=self.limits.beacon_interval_s,
            servers=self.config.queue_server.servers or self.config.queue_server.listen,
            token=self.queue_token,
            handlers=self.loaded.handlers,
            rate_limited=limiters_of(self.config.queues),
            pulsar_endpoint=self.config.pulsar.listen,
            pulsar_curve=client_curve(self.config),
            lease_fd=lease_fd,
            close_fds=self.leases.inherited_fds(),
            done_map=self.leases.done_map(slot_id),
        )
        try:
            pid = spawn(lambda: run_slot(spec), keep_sockets=self.slot_sockets)
        except OSError as exc:
            log.error("cannot fork slot %d for %s (%s); retrying with backoff", slot_id, queue, exc)
            self.deaths.failed_fork(queue, now)
            self.leases.close(slot_id)
            return
        finally:
            os.close(lease_fd)
        self.slots[slot_id] = Slot(slot_id=slot_id, pid=pid, assignment=spec.assignment, started_at=now)
        log.info("forked slot %d (pid %d) for %s", slot_id, pid, queue)

    def _retarget(self, slot: Slot, assignment: Assignment, now: float) -> None:
        log.info("retargeting slot %d (pid %d): %s -> %s",
                 slot.slot_id, slot.pid, slot.assignment.queue, assignment.queue)
        slot.assignment = assignment
        slot.retarget_sent_at = now
        self.link.send(slot.slot_id, slot.pid, assignment)

    def _resend_retargets(self, now: float) -> None:
        """The ROUTER drops a message to a slot not connected yet: resend until it reports."""
        resend_after_s = self.limits.beacon_interval_s * 3
        for slot in self.slots.values():
            if slot.retarget_sent_at is None or slot.state is not SlotState.RUNNING:
                continue
            if slot.queue == slot.assignment.queue:
                slot.retarget_sent_at = None
            elif now - slot.retarget_sent_at >= resend_after_s:
                slot.retarget_sent_at = now
                self.link.send(slot.slot_id, slot.pid, slot.assignment)

    def _warn_unhandled(self) -> None:
        for queue in self.reconciler.unhandled_queues():
            if queue not in self._warned_unhandled:
                self._warned_unhandled.add(queue)
                log.error("queue %s is in the slot map but no handler serves it%s; it gets no slots",
                          queue, f" (failed: {', '.join(self.loaded.failures)})" if self.loaded.failures else "")

    # The report

    def report(self, now: float) -> HostReport:
        alive = [s for s in self.slots.values() if s.state in ALIVE]
        return build_report(
            host=self.host,
            master_pid=os.getpid(),
            sent_at_unix=time.time(),
            now=now,
            capacity=self.sizing.capacity,
            figures=self.sizing.figures,
            slots=alive,
            counters=self.counters,
            handler_failures=self.loaded.failures,
            unhandled_queues=self.reconciler.unhandled_queues(),
            queue_settings=queue_settings(self.config, self.loaded.handlers),
            crash_log=self.deaths.crashes,
        )

    def maybe_report(self, now: float) -> None:
        if self.report_path is None or now - self._report_at < self.report_interval_s:
            return
        self._report_at = now
        temporary = self.report_path.with_suffix(".tmp")
        # Its own boundary: a report that cannot be written (a full disk) must not keep the
        # rest of the tick (a managed master's heartbeats) from running.
        with self.report_turns:
            temporary.write_bytes(self.report(now).encode())
            # Readers never see half a report.
            temporary.replace(self.report_path)

    # Events -> actions

    def _apply(self, slot: Slot, event: SlotEvent, now: float) -> None:
        for action in on_event(slot, event, now):
            self._perform(action)

    def _perform(self, action: Action) -> None:
        match action:
            case SendSignal(pid, signum):
                send_signal(pid, signum)
            case Count(counter):
                self.counters[counter] += 1
            case Log(warning, message):
                log.log(logging.WARNING if warning else logging.INFO, message)
            case SettleJobs():
                self.settle_jobs(action)

    def settle_jobs(self, action: SettleJobs) -> Settlement:
        """A dead slot's batch, settled now (master/settle.py): what its handler decided
        stands, one job is charged only when the death names it, the others go back uncharged."""
        queue = action.queue
        cls = self.loaded.handlers.get(queue)
        policy = None if cls is None else handler_policy(cls, self.assignment_for(queue).retry_policy())
        reply_to = None if cls is None else ReplyTo(cls.output_queue(), cls.reply_ttl_s)
        running, done_positions = self.leases.batch_page(action.slot_id, len(action.lease.jobs))
        settled = settle(action.lease, action.outcomes, reason=action.reason, blame=action.blame,
                         ordered=action.ordered, running=running, done_positions=done_positions,
                         policy=policy, reply_to=reply_to, rng=self.rng)
        for bad in settled.bad_notes:
            log.warning("%s: %s", action.reason, bad)
        self.keeper.send(settled.requests)
        self.counters[Counter.JOBS_OF_DEAD_SLOTS_FAILED] += settled.charged
        self.counters[Counter.JOBS_OF_DEAD_SLOTS_HONOURED] += settled.honoured
        self.counters[Counter.JOBS_OF_DEAD_SLOTS_GIVEN_BACK] += settled.given_back
        log.warning("%s holding %d jobs of %s: %d outcomes honoured, %d given back uncharged, "
                    "%d charged%s", action.reason, len(action.lease.jobs),
                    queue, settled.honoured, settled.given_back, settled.charged,
                    f" (job {settled.blamed_key})" if settled.blamed_key else "")
        return settled

    def _queue_client(self) -> QueueClient:
        servers = self.config.queue_server.servers or self.config.queue_server.listen
        return QueueClient(servers, token=self.queue_token)

