"""The body of a slot process after the fork: signals, beacon thread, client, then step() until done."""
from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from config.curve import ClientCurve
from queue_server.client import QueueClient
from slot import producer
from slot.beacon import Assignment, Beacon, SlotPhase
from slot.done_map import DoneMap
from slot.exit_codes import SlotExit
from slot.handler import Handler
from slot.leases import LeaseReporter
from slot.link import BeaconLink
from slot.loop import SlotLoop, SlotStats, StepKind
from slot.memory import MemoryUsage, MemoryWatch, read_memory
from slot.orphan import OrphanRenewal
from slot.permits import RateLimitHook
from slot.pulsar.client import PermitClient
from slot.retarget import AssignmentInbox
from slot.source import ClientSource
from slot.wake import Waker

log = logging.getLogger(__name__)
# A new primary answers 1.5-2 s after a kill (docs/DESIGN.md, "Failover time"): room for that
# on a loaded machine, short enough that a slot told to stop is not held long.
SLOT_OFFLINE_WAIT_S = 10.0


@dataclass(frozen=True, slots=True)
class SlotSpec:
    """Everything a forked slot needs; handed over in memory by the fork itself."""

    slot_id: int
    assignment: Assignment
    beacon_endpoint: str
    beacon_interval_s: float
    servers: str | Sequence[str]
    token: str | None
    handlers: Mapping[str, type[Handler]]
    memory_watch_jobs: int = 1000
    memory_watch_s: float = 1.0
    # Queue -> limiter for queues with a rate_limit; their batches wait for permits.
    rate_limited: Mapping[str, str] = field(default_factory=dict)
    pulsar_endpoint: str | None = None
    # The write end of this slot's lease pipe to the master (slot/leases.py), and the
    # master's descriptors the fork copied that the slot must not hold (other slots' pipes).
    lease_fd: int | None = None
    close_fds: tuple[int, ...] = ()
    # The DONE bits of its batches, shared with the master (slot/done_map.py).
    done_map: DoneMap | None = None
    pulsar_curve: ClientCurve | None = None
    # Its master's host name: the slot names its connection slot.<host>.<slot id> (CLIENT
    # NAME), which a finished job keeps as who ran it (`ran_by`).
    host_name: str = ""
    # Orphaned (its master died), how long the slot renews its batch's locks itself while it
    # finishes: the master's stop_timeout_s (slot/orphan.py).
    orphan_timeout_s: float = 30.0


def slot_door(host: str, slot_id: int) -> str:
    """`slot.<host>.<slot id>`, within CLIENT NAME's 64 characters of [A-Za-z0-9_.:-]."""
    suffix = f".{slot_id}"
    host = re.sub(r"[^A-Za-z0-9_.:-]", "_", host or socket.gethostname())
    return "slot." + host[: 64 - len("slot.") - len(suffix)] + suffix


def run_slot(spec: SlotSpec) -> int:
    """Run the slot until it stops; return its exit code (a SlotExit)."""
    forget_parent_signals()
    line_buffered_output()
    for fd in spec.close_fds:
        with contextlib.suppress(OSError):  # closed already: nothing of the master's to drop
            os.close(fd)
    leases = None
    if spec.lease_fd is not None:
        leases = LeaseReporter(spec.lease_fd, slot_id=spec.slot_id, pid=os.getpid(),
                               done_map=spec.done_map)
    waker = Waker()
    waker.install()
    inbox = AssignmentInbox(spec.assignment.queue)
    # offline_wait_s: a handler's put (slot/producer.py) refused while a failover is under
    # way waits for the new primary instead of failing its job (issue 25).
    client = QueueClient(spec.servers, token=spec.token, offline_wait_s=SLOT_OFFLINE_WAIT_S,
                         name=slot_door(spec.host_name, spec.slot_id))
    producer.install(client)  # the handler's follow-up jobs (Handler.put) go through it
    memory_watch = MemoryWatch(every_jobs=spec.memory_watch_jobs, every_s=spec.memory_watch_s)
    permits = PermitClient(spec.pulsar_endpoint, curve=spec.pulsar_curve) if spec.rate_limited else None
    hooks = [RateLimitHook(permits, spec.rate_limited, stopping=lambda: waker.stop_requested)] if permits else []
    loop = SlotLoop(
        assignment=spec.assignment,
        handlers=spec.handlers,
        source=ClientSource(client, waker),
        clock=time.monotonic,
        read_memory=read_memory,
        memory_watch=memory_watch,
        take_assignments=inbox.take,
        # A retarget or a stop (SIGTERM: the master's graceful stop or a code reload) gives
        # back the jobs of the batch not started yet: the running job finishes, the others go
        # to the head of their queue uncharged (slot/retarget.py), and the slot exits after one
        # job's time, not after its whole batch.
        moving=lambda: inbox.moving or waker.stop_requested,
        before_batch=hooks,
        leases=leases,
    )
    def on_memory_read(usage: MemoryUsage) -> None:
        # A slot that leaked in its last batch and now waits for jobs would keep the memory
        # until the next batch: wake it so it exits now.
        if loop.over_memory_limit(usage):
            waker.wake()

    def on_beacon(now: float) -> None:
        # A slot that passed max_slot_age_s while it waits for jobs would wait on: wake it so
        # it leaves now, while idle, rather than after its next batch.
        if loop.stats.phase is SlotPhase.IDLE and loop.recycling(now) is not None:
            waker.wake()

    beacons = BeaconFactory(spec.slot_id, loop.stats, memory_watch, on_memory_read, on_beacon)

    def on_assignment(assignment: Assignment) -> None:
        inbox.put(assignment)
        waker.wake()

    link = BeaconLink(
        endpoint=spec.beacon_endpoint,
        slot_id=spec.slot_id,
        interval_s=spec.beacon_interval_s,
        snapshot=beacons.next,
        on_assignment=on_assignment,
        on_orphaned=lambda: on_orphaned(spec, leases),
        # The master allows a fresh slot a grace period before its first beacon.
        first_beacon_after_s=spec.beacon_interval_s,
    )
    link.start()
    code = SlotExit.CRASHED
    try:
        code = _run(loop, waker)
    finally:
        loop.close()
        link.close(beacons.next(exit_reason=code.name.lower()))
        client.close()
        if permits is not None:
            permits.close()
    return code


def on_orphaned(spec: SlotSpec, leases: LeaseReporter | None) -> None:
    """The master is gone: stop as on a graceful stop (the running job finishes, the rest of
    the batch goes back), keeping the batch's locks alive meanwhile (slot/orphan.py)."""
    if leases is not None:
        OrphanRenewal(lambda: QueueClient(spec.servers, token=spec.token), leases.held,
                      timeout_s=spec.orphan_timeout_s).start()
    os.kill(os.getpid(), signal.SIGTERM)


def _run(loop: SlotLoop, waker: Waker) -> SlotExit:
    while True:
        if waker.stop_requested and not loop.stop_requested:
            loop.request_stop()
        result = loop.step(time.monotonic())
        if result.kind is StepKind.EXIT:
            assert result.exit_code is not None
            return result.exit_code
        if result.kind is StepKind.RETRY:
            waker.sleep(result.retry_after_s)


class BeaconFactory:
    """Builds beacons from the loop's live stats (called from the beacon thread)."""

    def __init__(
        self,
        slot_id: int,
        stats: SlotStats,
        memory_watch: MemoryWatch,
        on_memory_read: Callable[[MemoryUsage], None],
        on_beacon: Callable[[float], None] = lambda now: None,
    ) -> None:
        self.slot_id = slot_id
        self.stats = stats
        self.memory_watch = memory_watch
        self.on_memory_read = on_memory_read
        self.on_beacon = on_beacon
        self.pid = os.getpid()
        self._seq = 0

    def next(self, exit_reason: str | None = None) -> Beacon:
        now = time.monotonic()
        stats = self.stats
        if self.memory_watch.due(jobs_done=stats.jobs_done, now=now):
            self.memory_watch.mark(jobs_done=stats.jobs_done, now=now)
            stats.memory = read_memory()
            self.on_memory_read(stats.memory)
        self.on_beacon(now)
        started = stats.batch_started_at
        self._seq += 1
        return Beacon(
            slot_id=self.slot_id,
            pid=self.pid,
            seq=self._seq,
            phase=stats.phase,
            queue=stats.queue,
            jobs_done=stats.jobs_done,
            jobs_later=stats.jobs_later,
            jobs_failed=stats.jobs_failed,
            jobs_dead=stats.jobs_dead,
            batches=stats.batches,
            errors=stats.errors,
            busy_s=round(stats.busy_s, 6),
            batch_age_s=0.0 if started is None else max(0.0, now - started),
            pss_bytes=stats.memory.pss_bytes,
            private_dirty_bytes=stats.memory.private_dirty_bytes,
            exit_reason=exit_reason,
        )


def line_buffered_output() -> None:
    """print() from a handler reaches the master's output (its log file, the journal) line by
    line. Python buffers stdout in 8 KiB blocks when it is not a terminal (systemd's journal,
    a file): a handler's print() came out minutes late, out of order with the log lines, and
    was lost when its slot was killed (stop deadline, hung, memory, cancel). `slotmap run`
    hides this with PYTHONUNBUFFERED; a systemd unit does not."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and not stream.closed:
            stream.reconfigure(line_buffering=True)


def forget_parent_signals() -> None:
    """The master's wakeup pipe and handlers came with the fork: a slot's signals must not
    reach the master's loop."""
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)
