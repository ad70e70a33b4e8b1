"""The master's loop: preload handlers, fork slots, watch their beacons, reap, kill, reconcile.

    while not stopping:                 # now = time.monotonic(), once per tick
        wait for beacons, a signal or a manager frame    # handlers only enqueue
        dispatch signals; take beacons and lease notes; reap()   # a dead slot's batch: settled
        kill_hung(now)                  # silent and idle on CPU, batch past its timeout, over the hard limit
        kill the cancelled              # slots whose job was cancelled (master/cancels.py)
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
import sys
import time
from collections import Counter as Tally
from collections.abc import Iterable
from pathlib import Path

import zmq

from config.curve import client_curve
from config.errors import ConfigError
from config.models import ClusterConfig
from config.periodic import TurnBoundary
from config.tokens import role_token
from master import host, silence
from master.assignments import assignment_for, queue_settings
from master.cancels import CancelWatch
from master.code_reload import Code, import_code
from master.dead_batches import settle_dead_batch
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
    StopRequested,
    on_event,
)
from master.link import MasterLink
from master.reconciler import Reconciler, Retarget, SlotAssignment, SlotCounts, Spawn, Stop, changes
from master.reloading import CodeReloader, on_sighup
from master.report import HostReport, build_report
from master.report_file import ReportFile
from master.settle import Settlement
from master.signal_queue import SignalQueue
from master.sizing import Sizing
from master.supervisor import Reaped, open_sockets, reap, send_signal, spawn
from master.zmq_router import rewatch
from queue_server.client import QueueClient
from slot.beacon import Assignment
from slot.discovery import LoadedHandlers
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
        self.reloader = CodeReloader(Code(self.loaded, {}, ""), config.master.handler_modules)
        self.reconciler = Reconciler(
            handled_queues=frozenset(),
            priorities={name: q.priority for name, q in config.queues.items()},
        )
        self.sizing = Sizing(config.master)
        self.signals = SignalQueue()
        self.tick_turns = TurnBoundary("the master's tick", next_turn=f"the next tick in {TICK_S:g} s", log=log)
        self.report_file = ReportFile(report_path, report_interval_s)
        # The worker role's (least privilege, docs/SECURITY.md "Roles"): its slots and lease
        # keeper take, finish and put jobs; $SLOTMAP_QUEUE_TOKEN(_FILE), else the role's file,
        # else the one admin token.
        try:
            self.queue_token = role_token(config.queue_server, "worker")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.leases = LeasePipes()
        servers = config.queue_server.servers or config.queue_server.listen
        self.keeper = LeaseKeeper(lambda: QueueClient(servers, token=self.queue_token))
        self.cancels = CancelWatch()
        self.rng = random.Random()
        self.slot_sockets = open_sockets()

    # Start-up

    def preload(self) -> LoadedHandlers:
        """Import every handler module, then freeze the GC so forks keep sharing those pages
        (a collection would write to every object header and copy the pages)."""
        code = import_code(self.master_config.handler_modules, before=set(sys.modules))
        self.reloader = CodeReloader(code, self.master_config.handler_modules)
        self.use_handlers(code.loaded)
        self.deaths.starts.imports_failed(code.loaded.failures, code.loaded.tracebacks, time.time())
        gc.collect()
        gc.freeze()
        log.info(
            "preloaded handlers for %s%s; code version %s",
            ", ".join(sorted(self.loaded.handlers)) or "no queue",
            f"; failed: {', '.join(self.loaded.failures)}" if self.loaded.failures else "",
            code.version or "(no app module)",
        )
        return self.loaded

    def use_handlers(self, loaded: LoadedHandlers) -> None:
        """The handlers new slots are forked with (at the preload, and a code reload's)."""
        self.loaded = loaded
        self.reconciler.handled_queues = frozenset(loaded.handlers)
        # Sockets opened from now on are the master's own: no slot keeps them (drop_sockets).
        self.slot_sockets = open_sockets()

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
                self.apply_event(slot, Beaconed(beacon), now)
        self.take_lease_notes(self.leases.read(), now)
        self.reap(now)
        self.kill_hung(now)
        self.keeper.watch_cancels(any(s.lease is not None for s in self.slots.values()))
        for slot, cancelled in self.cancels.matched(self.keeper.take_cancels(), self.slots.values(), now):
            self.apply_event(slot, cancelled, now)
        self.keeper.renew(renewals(self.slots.values(), now))
        self.sizing.refresh(now, self.slots.values())
        if not self.stopping:
            self.reloader.tick(self, now)
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
        """SIGTERM: every slot finishes the job it runs and gives back the rest of its batch
        (at the head of the queue, uncharged), then exits; a job still running after
        stop_timeout_s is killed with its slot and given back uncharged (master/settle.py:
        a missed stop deadline blames nobody), to run again from its start."""
        if self.stopping:
            return
        timeout_s = self.master_config.stop_timeout_s
        log.info("stopping: SIGTERM to %d slots (each finishes its running job and gives back "
                 "the rest of its batch), SIGKILL after stop_timeout_s %g s", len(self.slots), timeout_s)
        self.stopping = True
        self.reloader.stop()
        for slot in list(self.slots.values()):
            self.apply_event(slot, StopRequested(timeout_s), now)

    def handle_reload(self) -> None:
        """SIGHUP: the config re-read, then the handler code reloaded (master/reloading.py),
        the leases first brought up to date; the import runs beside the loop (it forks nothing meanwhile)."""
        self.take_lease_notes(self.leases.read(), time.monotonic())
        on_sighup(self, time.monotonic())

    @property
    def managed(self) -> bool:
        """True when a manager sends the slot map (the config's static map is not used)."""
        return False

    # Children

    def take_lease_notes(self, notes: Iterable[Note], now: float) -> None:
        for note in notes:
            slot = self.slots.get(note.slot_id)
            if slot is not None and note.pid in (None, slot.pid):
                if (event := self.deaths.before_note(slot, note.event, now)) is not None:
                    self.apply_event(slot, event, now)
                self.deaths.after_note(slot)

    def reap(self, now: float) -> None:
        for child in reap():
            if self.reloader.owns(child.pid):
                self.reloader.trial_exited(self, child.code, child.signal)
                continue
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
        for slot, event in silence.due_events(self.slots.values(), now, self.limits):
            self.apply_event(slot, event, now)

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
                    self.apply_event(self.slots[slot_id], StopRequested(self.master_config.stop_deadline_s), now)
                case Retarget(slot_id, queue):
                    self.retarget(self.slots[slot_id], self.assignment_for(queue), now)
                case Spawn(slot_id, queue):
                    # Not while a reload imports: sys.modules is half new (master/background_import.py).
                    if slot_id not in self.slots and not self.reloader.importing \
                            and self.deaths.may_fork(queue, now):
                        self.spawn_slot(slot_id, queue, now)
        self.link.resend_retargets(self.slots.values(), now, self.limits.beacon_interval_s * 3)
        self._warn_unhandled()

    def assignment_for(self, queue: str) -> Assignment:
        return assignment_for(self.config, self.loaded.handlers[queue], queue)

    def spawn_slot(self, slot_id: int, queue: str, now: float) -> None:
        lease_fd = self.leases.open(slot_id)
        spec = SlotSpec(
            slot_id=slot_id, host_name=self.host,
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
            orphan_timeout_s=self.master_config.stop_timeout_s,
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
        self.slots[slot_id] = Slot(slot_id=slot_id, pid=pid, assignment=spec.assignment, started_at=now,
                                   generation=self.reloader.generation)
        log.info("forked slot %d (pid %d) for %s", slot_id, pid, queue)

    def retarget(self, slot: Slot, assignment: Assignment, now: float) -> None:
        log.info("retargeting slot %d (pid %d): %s -> %s",
                 slot.slot_id, slot.pid, slot.assignment.queue, assignment.queue)
        slot.assignment = assignment
        slot.retarget_sent_at = now
        self.link.send(slot.slot_id, slot.pid, assignment)

    def _warn_unhandled(self) -> None:
        failed = f" (failed: {', '.join(self.loaded.failures)})" if self.loaded.failures else ""
        for queue in self.reconciler.newly_unhandled():
            log.error("queue %s is in the slot map but no handler serves it%s; it gets no slots", queue, failed)

    # The report

    def report(self, now: float) -> HostReport:
        return build_report(
            host=self.host,
            master_pid=os.getpid(),
            sent_at_unix=time.time(),
            now=now,
            capacity=self.sizing.capacity,
            figures=self.sizing.figures,
            slots=[s for s in self.slots.values() if s.state in ALIVE],
            counters=self.counters,
            handler_failures=self.loaded.failures,
            unhandled_queues=self.reconciler.unhandled_queues(),
            queue_settings=queue_settings(self.config, self.loaded.handlers),
            crash_log=self.deaths.crashes,
            code=self.reloader.state(),
            start_failures=self.deaths.start_failures(now),
        )

    def maybe_report(self, now: float) -> None:
        self.report_file.maybe_write(now, lambda: self.report(now).encode())

    # Events -> actions

    def apply_event(self, slot: Slot, event: SlotEvent, now: float) -> None:
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
        cls = self.loaded.handlers.get(action.queue)
        policy = None if cls is None else handler_policy(cls, self.assignment_for(action.queue).retry_policy())
        return settle_dead_batch(action, cls=cls, policy=policy, leases=self.leases, keeper=self.keeper,
                                 counters=self.counters, rng=self.rng)

