"""A code reload on a master (SIGHUP, `systemctl reload`, `slotmap reload`): import the handler
code afresh on a thread beside the loop (master/background_import.py), try its setup() in one
forked trial, then roll the slots to it one per queue at
a time (master/generations.py). Refused new code changes nothing: the old generation keeps
serving, and the failure is logged and carried in the host report (the manager's event, the
Hosts page's badge) until a reload succeeds.

Like gunicorn's HUP (new workers from the new code, the old ones finishing their request
within graceful_timeout) rather than its USR2 (a second master): slots are children of the
one master that renews their leases and settles their batches, so the master stays.
"""
from __future__ import annotations

import gc
import logging
import signal
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from config.errors import ConfigError
from config.load import load_config
from config.models import ClusterConfig, MasterConfig, QueueConfig
from master.background_import import BackgroundImport
from master.code_reload import Code, ImportRefused, Undo, describe, reimport
from master.generations import ReloadPhase, Trial, rolled, to_retire
from master.lease_keeper import LeaseKeeper
from master.lifecycle import SERVING, Slot, SlotEvent, StopRequested
from master.reconciler import Reconciler, SlotAssignment, SlotCounts
from master.report import CodeState
from master.supervisor import SocketId, send_signal, spawn
from slot.beacon import Assignment
from slot.discovery import LoadedHandlers, extend_sys_path
from slot.exit_codes import SlotExit, describe_exit
from slot.handler import Handler
from slot.process import forget_parent_signals


class Master(Protocol):
    """What a reload uses of the master (master/arbiter.py; a Protocol, so the arbiter's
    import of this module makes no circle)."""

    config: ClusterConfig
    config_path: Path | None
    slots: dict[int, Slot]
    keeper: LeaseKeeper
    reconciler: Reconciler
    loaded: LoadedHandlers
    slot_sockets: frozenset[SocketId]
    reloader: CodeReloader
    stopping: bool

    @property
    def master_config(self) -> MasterConfig: ...
    @property
    def managed(self) -> bool: ...
    def use_handlers(self, loaded: LoadedHandlers) -> None: ...
    def apply_event(self, slot: Slot, event: SlotEvent, now: float) -> None: ...
    def apply_slot_map(self, desired: SlotCounts | SlotAssignment) -> None: ...
    def assignment_for(self, queue: str) -> Assignment: ...
    def retarget(self, slot: Slot, assignment: Assignment, now: float) -> None: ...

log = logging.getLogger(__name__)

# A reload's import running this long is logged (then at twice that, ...): slots that die
# meanwhile are not replaced.
SLOW_IMPORT_WARN_S = 10.0


def try_setup(handlers: Mapping[str, type[Handler]], queues: Collection[str]) -> int:
    """The trial's body (a forked child): each handler's setup() then teardown(), as a slot's."""
    forget_parent_signals()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGTERM, signal.SIGINT))  # blocked by spawn
    for queue in sorted(queues):
        cls = handlers[queue]
        try:
            handler = cls()
            handler.setup()
            handler.teardown()
        except Exception:  # the new code's fault, reported by the exit code
            log.exception("code reload: %s.setup() failed for queue %s", cls.__qualname__, queue)
            return int(SlotExit.SETUP_FAILED)
    return int(SlotExit.STOPPED)


class CodeReloader:
    def __init__(self, code: Code, modules: Sequence[str]) -> None:
        self.code = code
        # The handler_modules the code in force was imported from.
        self.modules = list(modules)
        self.generation = 0
        self.phase = ReloadPhase.IDLE
        # The last refused reload (cleared by the next one that succeeds).
        self.failure: str | None = None
        self._pending: tuple[Code, Undo, list[str]] | None = None
        self._trial: Trial | None = None
        # A reload asked while one is under way runs when it ends.
        self._again: Sequence[str] | None = None
        # The import under way (phase IMPORTING), what it imports, and since when.
        self._import: BackgroundImport[tuple[Code, Undo]] | None = None
        self._import_modules: list[str] = []
        self._import_started = 0.0
        self._slow_warned_after_s = SLOW_IMPORT_WARN_S
        # Requests finished: rolled, refused, or nothing to do (the report's counter).
        self.answered = 0

    @property
    def busy(self) -> bool:
        return self.phase is not ReloadPhase.IDLE

    def request(self, master: Master, modules: Sequence[str], now: float) -> None:
        if self.busy:
            log.info("code reload asked during one (%s); it follows when this one ends", self.phase)
            self._again = modules
            return
        on_disk = self.code.on_disk_version()
        if list(modules) == self.modules and on_disk == self.code.version:
            log.info("code reload: handler code unchanged (version %s); slots kept", self.code.version)
            self.answered += 1
            return
        # The import runs beside the loop (master/background_import.py): the loop goes on
        # sending heartbeats and renewing the running jobs' locks, and forks nothing until it ends.
        current = self.code
        self._import = BackgroundImport(lambda: reimport(current, modules))
        self._import_modules = list(modules)
        self._import_started = now
        self._slow_warned_after_s = SLOW_IMPORT_WARN_S
        self.phase = ReloadPhase.IMPORTING
        self._import.start()
        log.info("code reload: importing %s beside the loop; no slot is forked until it ends",
                 ", ".join(modules) or "no module")

    @property
    def importing(self) -> bool:
        """True while the new code is imported: the master forks nothing meanwhile."""
        return self.phase is ReloadPhase.IMPORTING

    def _imported(self, master: Master, now: float) -> None:
        """The import ended: refuse the new code, or fork its trial."""
        assert self._import is not None
        job, self._import = self._import, None
        modules = self._import_modules
        log.info("code reload: import ended after %.1f s", now - self._import_started)
        try:
            new, undo = job.outcome()
        except ImportRefused as exc:
            self._refuse(f"the new code failed to import: {exc}")
            self._follow_up(master, now)
            return
        queues = self._served(master)
        missing = sorted(queues - set(new.loaded.handlers))
        why = (f"the new code failed to import: {describe(new.loaded.failures)}" if new.loaded.failures
               else f"the new code has no handler for {', '.join(missing)}, served here" if missing else None)
        if why is None:
            try:
                pid = spawn(lambda: try_setup(new.loaded.handlers, queues), keep_sockets=master.slot_sockets)
            except OSError as exc:
                why = f"cannot fork the trial of the new code's setup() ({exc})"
            else:
                self._pending = (new, undo, modules)
                self._trial = Trial(pid, now + master.master_config.drain_timeout_s)
                self.phase = ReloadPhase.TRYING
                log.info("code reload: version %s imported (was %s); trying setup() of %s in pid %d",
                         new.version, self.code.version, ", ".join(sorted(queues)) or "no queue", pid)
                return
        undo.restore()
        self._refuse(why)
        self._follow_up(master, now)

    def state(self) -> CodeState:
        return CodeState(self.code.version, self.generation, self.busy, self.failure, self.answered)

    def owns(self, pid: int) -> bool:
        return self._trial is not None and self._trial.pid == pid

    def trial_exited(self, master: Master, code: int | None, sig: int | None) -> None:
        self._trial = None
        if self._pending is None:  # refused already (its deadline passed)
            return
        new, undo, modules = self._pending
        self._pending = None
        if sig is None and code == SlotExit.STOPPED:
            self.modules = modules
            self._commit(master, new)
            return
        undo.restore()
        self._refuse(f"a handler's setup() failed with the new code ({describe_exit(code, sig)}; "
                     "its traceback is in the log above)")
        self._follow_up(master, time.monotonic())

    def tick(self, master: Master, now: float) -> None:
        if self.phase is ReloadPhase.IMPORTING:
            assert self._import is not None
            if self._import.done:
                self._imported(master, now)
            elif now - self._import_started >= self._slow_warned_after_s:
                self._slow_warned_after_s *= 2
                log.warning("code reload: the import has run %.0f s; slots that die are not replaced "
                            "until it ends (heartbeats and lock renewals go on)", now - self._import_started)
            return
        if self.phase is ReloadPhase.TRYING and self._trial is not None and now >= self._trial.deadline:
            send_signal(self._trial.pid, signal.SIGKILL)
            assert self._pending is not None
            self._pending[1].restore()
            self._pending = None
            self._refuse(f"the new code's setup() ran past drain_timeout_s "
                         f"{master.master_config.drain_timeout_s:g} s")
            self._follow_up(master, now)
            return
        if self.phase is not ReloadPhase.ROLLING:
            return
        slots = master.slots.values()
        for slot in to_retire(slots, self.generation):
            log.info("code reload: slot %d (pid %d) of %s, generation %d, finishes its job and "
                     "gives back the rest", slot.slot_id, slot.pid, slot.assignment.queue, slot.generation)
            master.apply_event(slot, StopRequested(master.master_config.drain_timeout_s), now)
        if rolled(slots, self.generation):
            self.phase = ReloadPhase.IDLE
            self.answered += 1
            log.info("code reload done: every slot runs version %s (generation %d)",
                     self.code.version, self.generation)
            self._follow_up(master, now)

    def stop(self) -> None:
        """The master stops: a trial under way is killed (reaped with the slots)."""
        if self._trial is not None:
            send_signal(self._trial.pid, signal.SIGKILL)

    def _commit(self, master: Master, new: Code) -> None:
        self.code = new
        self.generation += 1
        self.failure = None
        self.phase = ReloadPhase.ROLLING
        master.use_handlers(new.loaded)
        # The old code's objects are garbage once its slots are gone; collect what already is
        # and freeze the rest again, so the new forks share the new code's pages.
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        log.info("code reload: setup() passed; rolling to version %s (generation %d), one slot per "
                 "queue at a time, drain_timeout_s %g s", new.version, self.generation,
                 master.master_config.drain_timeout_s)

    def _refuse(self, why: str) -> None:
        self.phase = ReloadPhase.IDLE
        self.answered += 1
        self.failure = f"code reload refused: {why}; version {self.code.version} keeps serving"
        log.error("%s", self.failure)

    def _follow_up(self, master: Master, now: float) -> None:
        again, self._again = self._again, None
        if again is not None:
            self.request(master, again, now)

    @staticmethod
    def _served(master: Master) -> set[str]:
        queues = {slot.assignment.queue for slot in master.slots.values()}
        return queues | set(master.reconciler.wanted_queues())


def on_sighup(master: Master, now: float) -> None:
    """Re-read the config, then reload the handler code if it changed on disk."""
    if master.stopping:
        log.info("SIGHUP ignored: the master is stopping")
        return
    modules = reload_config(master, managed=master.managed)
    master.reloader.request(master, modules, now)


def reload_config(master: Master, *, managed: bool) -> list[str]:
    """SIGHUP's config part: re-read the file; the handler modules (and python_path) to import.

    Unmanaged, the queues' settings and the static map change in place (slots retargeted,
    not re-forked). Managed, the slot map is the manager's: the static map is not applied
    (it used to be: a SIGHUP answered "static map {}" and stopped every slot, and the
    manager, whose map had not changed, never sent it again)."""
    if master.config_path is None:
        log.info("SIGHUP: the master runs on the embedded default config; reloading the code only")
        return list(master.reloader.modules)
    try:
        config = load_config(master.config_path)
    except ConfigError as exc:
        log.error("SIGHUP: %s; keeping the running config (the code is still reloaded)", exc)
        return list(master.reloader.modules)
    extend_sys_path(config.master.python_path)
    if managed:
        log.info("SIGHUP: the slot map comes from the manager; the config's static map is not applied")
        return list(config.master.handler_modules)
    master.config.master.static_slots = config.master.static_slots
    apply_queues(master, config.queues, time.monotonic())
    master.apply_slot_map(config.master.static_slots)
    log.info("SIGHUP: config reloaded; static map %s", dict(config.master.static_slots))
    return list(config.master.handler_modules)


def apply_queues(master: Master, queues: Mapping[str, QueueConfig], now: float) -> int:
    """New queue settings (an unmanaged master's SIGHUP, a managed one's from the manager's
    reload): slots forked from now on get them, and a serving slot whose batch size, retries,
    timeouts or limits change is told in place (a retarget to its own queue), not re-forked.
    How many slots were told."""
    master.config.queues = dict(queues)
    master.reconciler.priorities = {name: q.priority for name, q in queues.items()}
    told = 0
    for slot in master.slots.values():
        queue = slot.assignment.queue
        if slot.state in SERVING and queue in master.loaded.handlers:
            fresh = master.assignment_for(queue)
            if fresh != slot.assignment:
                master.retarget(slot, fresh, now)
                told += 1
    return told
