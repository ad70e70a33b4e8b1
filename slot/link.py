"""The slot's end of the master link: a thread with a ZeroMQ DEALER that sends a beacon every
interval and passes assignments (retargets) from the master to the loop.

A thread, not the loop, beacons: a batch may legitimately run for minutes, and the master
must still see the slot alive and its memory. A slot frozen below Python (a C call holding
the GIL, SIGSTOP) stops beaconing and is killed as hung; one stuck in Python code keeps
beaconing, and the master kills it when its batch outlives the handler's batch_timeout_s.
"""
from __future__ import annotations

import _thread
import logging
import os
import threading
import time
from collections.abc import Callable

import zmq

from config.periodic import TurnBoundary
from slot.beacon import Assignment, Beacon
from slot.errors import MessageError
from slot.wake import block_slot_signals_in_this_thread

log = logging.getLogger(__name__)

# How long the last beacon may wait for the master at exit.
FINAL_LINGER_MS = 200
# An assignment is a few hundred bytes; anything far larger is not from a sane master, and
# ZeroMQ cuts it off after its header instead of buffering it.
MAX_ASSIGNMENT_BYTES = 64 * 1024


def slot_identity(slot_id: int, pid: int) -> bytes:
    """The DEALER's routing id: a restarted slot (new pid) never receives its predecessor's mail."""
    return b"%d.%d" % (slot_id, pid)


class BeaconLink:
    def __init__(
        self,
        *,
        endpoint: str,
        slot_id: int,
        interval_s: float,
        snapshot: Callable[[], Beacon],
        on_assignment: Callable[[Assignment], None],
        on_orphaned: Callable[[], None],
        first_beacon_after_s: float = 0.0,
    ) -> None:
        self.endpoint = endpoint
        self.first_beacon_after_s = first_beacon_after_s
        self.parent_pid = os.getppid()
        self.on_orphaned = on_orphaned
        self._orphaned = False
        self.identity = slot_identity(slot_id, os.getpid())
        self.interval_s = interval_s
        self.snapshot = snapshot
        self.on_assignment = on_assignment
        self._final: Beacon | None = None
        self._closing = threading.Event()
        self._finished = threading.Event()
        self._started = False

    def start(self) -> None:
        # A bare thread: threading.Thread.start() waits until the new thread runs, two
        # context switches on a fresh slot's path to its first job (2 ms on a busy machine).
        _thread.start_new_thread(self._main, ())
        self._started = True

    def close(self, final: Beacon | None = None, *, timeout_s: float = 1.0) -> None:
        """Send `final` as the last beacon and stop the thread."""
        self._final = final
        self._closing.set()
        if self._started:
            self._finished.wait(timeout_s)

    def _main(self) -> None:
        threading.current_thread().name = "beacon"  # for the log lines it writes
        try:
            self._run()
        finally:
            self._finished.set()

    def _run(self) -> None:
        block_slot_signals_in_this_thread()
        # The link is built only when the first beacon is due: a slot whose job crashes it
        # in its first moments never pays for a ZeroMQ context, its I/O thread and the GIL
        # they take from the slot's start (issue 15: 1.4 ms of CPU, 3 ms of its start).
        self._closing.wait(self.first_beacon_after_s)
        context = zmq.Context(io_threads=1)
        sock = context.socket(zmq.DEALER)
        sock.setsockopt(zmq.ROUTING_ID, self.identity)
        sock.setsockopt(zmq.LINGER, 0)
        # A master that stops reading must not make the slot queue beacons without bound.
        sock.setsockopt(zmq.SNDHWM, 16)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_ASSIGNMENT_BYTES)
        sock.setsockopt(zmq.RCVHWM, 16)
        sock.connect(self.endpoint)
        try:
            self._beacon_until_closed(sock)
            if self._final is not None:
                sock.setsockopt(zmq.LINGER, FINAL_LINGER_MS)
                self._send(sock, self._final)
        except Exception:  # thread boundary (a turn has its own): without beacons the master kills us
            log.exception("beacon thread failed; the master will treat this slot as hung")
        finally:
            sock.close()
            context.term()

    def _beacon_until_closed(self, sock: zmq.Socket[bytes]) -> None:
        # One failed beacon (a memory reading, an assignment) must not end the thread: the
        # master would kill this slot as hung, mid-batch.
        turns = TurnBoundary("a beacon turn", log=log, next_turn=f"the next beacon in {self.interval_s:g} s "
                             "(the master counts a slot silent for a few intervals as hung)")
        next_at = time.monotonic()
        while not self._closing.is_set():
            with turns:
                next_at = self._turn(sock, next_at)
            if turns.failures:  # a socket that keeps failing must not spin this thread
                self._closing.wait(self.interval_s)

    def _turn(self, sock: zmq.Socket[bytes], next_at: float) -> float:
        """A beacon when one is due, and whatever the master sent; the next beacon's time."""
        now = time.monotonic()
        if now >= next_at:
            self._check_parent()
            self._send(sock, self.snapshot())
            # Skip missed ticks instead of bursting beacons after a stall.
            next_at = max(next_at + self.interval_s, now)
        wait_ms = max(0, int((next_at - time.monotonic()) * 1000))
        if sock.poll(min(wait_ms, 50), zmq.POLLIN):
            self._receive(sock)
        return next_at

    def _check_parent(self) -> None:
        """A slot whose master died has nobody to restart or watch it: it finishes its batch
        and exits, and the next master forks fresh slots."""
        if not self._orphaned and os.getppid() != self.parent_pid:
            self._orphaned = True
            log.warning("master (pid %d) is gone; stopping after the current batch", self.parent_pid)
            self.on_orphaned()

    def _receive(self, sock: zmq.Socket[bytes]) -> None:
        frame = sock.recv()
        try:
            assignment = Assignment.decode(frame)
        except MessageError as exc:
            log.warning("dropping a frame from the master: %s", exc)
            return
        self.on_assignment(assignment)

    @staticmethod
    def _send(sock: zmq.Socket[bytes], beacon: Beacon) -> None:
        try:
            sock.send(beacon.encode(), zmq.NOBLOCK)
        except zmq.Again:
            # Master not reading: drop this beacon; the next one carries the totals anyway.
            return
