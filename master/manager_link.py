"""The master's end of the manager link: Paranoid Pirate heartbeats, a polled DEALER.

The master (a DEALER) sends its HostReport every heartbeat; the manager (a ROUTER) sends
back a heartbeat carrying this host's part of the slot map, or None while it has not
planned for us yet. After `liveness` silent intervals the master drops the socket and
reconnects with exponential backoff; meanwhile it keeps running its last map.
The frames themselves live in master/manager_frames.py, which the manager imports
without this module's arbiter.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum, auto
from typing import Any

import zmq

from config.curve import ClientCurve, CurveKeys, client_curve
from config.models import ClusterConfig
from master.arbiter import Master
from master.manager_frames import (
    BACKOFF_INITIAL_INTERVALS,
    BACKOFF_MAX_INTERVALS,
    DEFAULT_MAX_MESSAGE_BYTES,
    LinkFrameError,
    ManagerFrame,
    MasterFrame,
)
from master.reconciler import SlotAssignment
from master.reloading import apply_queues
from master.report import HostReport

log = logging.getLogger(__name__)

# Manager frames waiting at a master: one a heartbeat, so a few seconds' worth.
QUEUED_FRAMES = 16
# A slot that started or stopped is reported at once, not at the next heartbeat (issue 28:
# the dashboard's slot counts within 1 s of the masters), but reports never come closer
# than this: a map that moves many slots costs a few reports, not one per slot.
EARLY_REPORT_GAP_S = 0.2


# Pure: the heartbeat and reconnect schedule, clock passed in.


class LinkState(StrEnum):
    # Socket open; the manager was heard within liveness intervals (or we just connected).
    CONNECTED = auto()
    # Socket closed after silence; reconnect at `reconnect_at`.
    WAITING = auto()


class LinkAction(StrEnum):
    CONNECT = auto()
    DISCONNECT = auto()
    SEND_REPORT = auto()


@dataclass(slots=True)
class Heartbeats:
    """Paranoid Pirate, master side: heartbeat every interval, reconnect after `liveness`
    silent intervals, waiting backoff_initial_s, doubling up to backoff_max_s. Any frame
    from the manager resets the backoff."""

    interval_s: float
    liveness: int
    backoff_initial_s: float
    backoff_max_s: float
    state: LinkState = LinkState.WAITING
    expires_at: float = float("-inf")
    send_at: float = float("-inf")
    reconnect_at: float = float("-inf")
    backoff_s: float = field(default=0.0)
    sent_at: float = float("-inf")

    def __post_init__(self) -> None:
        self.backoff_s = self.backoff_s or self.backoff_initial_s

    @classmethod
    def for_interval(cls, interval_s: float, liveness: int) -> Heartbeats:
        """Backoff 1 .. 32 intervals: 1 s .. 32 s at the default 1 s heartbeat."""
        return cls(
            interval_s=interval_s,
            liveness=liveness,
            backoff_initial_s=interval_s * BACKOFF_INITIAL_INTERVALS,
            backoff_max_s=interval_s * BACKOFF_MAX_INTERVALS,
        )

    def on_frame(self, now: float) -> None:
        if self.state is LinkState.CONNECTED:
            self.expires_at = now + self.interval_s * self.liveness
            self.backoff_s = self.backoff_initial_s

    def tick(self, now: float) -> list[LinkAction]:
        if self.state is LinkState.WAITING:
            if now < self.reconnect_at:
                return []
            self.state = LinkState.CONNECTED
            self.expires_at = now + self.interval_s * self.liveness
            self.send_at = now + self.interval_s
            self.sent_at = now
            return [LinkAction.CONNECT, LinkAction.SEND_REPORT]
        if now >= self.expires_at:
            self.state = LinkState.WAITING
            self.reconnect_at = now + self.backoff_s
            self.backoff_s = min(self.backoff_s * 2, self.backoff_max_s)
            return [LinkAction.DISCONNECT]
        if now >= self.send_at:
            # Keep the rhythm, but never send a burst after a stall.
            self.send_at += self.interval_s
            if self.send_at <= now:
                self.send_at = now + self.interval_s
            self.sent_at = now
            return [LinkAction.SEND_REPORT]
        return []

    def report_soon(self, now: float) -> None:
        """Something the manager should see now (a slot started or stopped): the next report
        goes at once, or EARLY_REPORT_GAP_S after the last one; the rhythm goes on from it."""
        if self.state is LinkState.CONNECTED:
            self.send_at = min(self.send_at, max(now, self.sent_at + EARLY_REPORT_GAP_S))


# I/O: the DEALER socket.


class ManagerLink:
    """A DEALER to the manager (one or more endpoints: the active one answers), polled per tick."""

    def __init__(
        self,
        endpoints: Sequence[str],
        heartbeats: Heartbeats,
        *,
        curve: ClientCurve | CurveKeys | None = None,
        context: zmq.Context[Any] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.endpoints = list(endpoints)
        self.heartbeats = heartbeats
        # A bare key pair is the shared cluster key: the manager serves with the same one.
        self.curve = ClientCurve(curve, curve.public) if isinstance(curve, CurveKeys) else curve
        self.max_message_bytes = max_message_bytes
        self._context = context or zmq.Context.instance()
        self.socket: zmq.Socket[bytes] | None = None
        self.manager_pid: int | None = None

    def poll(self, now: float, report: Callable[[], HostReport]) -> list[ManagerFrame]:
        """Run due heartbeat actions, then take every frame waiting (never blocks).
        `report` is called only when a heartbeat is due."""
        for action in self.heartbeats.tick(now):
            self._perform(action, report, now)
        return self._receive(now)

    def say_goodbye(self, report: HostReport) -> None:
        if self.socket is not None and self.heartbeats.state is LinkState.CONNECTED:
            self._send(MasterFrame(report=report, leaving=True))

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close(linger=0)
            self.socket = None

    def _perform(self, action: LinkAction, report: Callable[[], HostReport], now: float) -> None:
        match action:
            case LinkAction.CONNECT:
                self._connect()
            case LinkAction.DISCONNECT:
                log.warning(
                    "manager silent for %d heartbeats; reconnecting in %.1f s, keeping the last slot map",
                    self.heartbeats.liveness, self.heartbeats.reconnect_at - now,
                )
                self.close()
            case LinkAction.SEND_REPORT:
                self._send(MasterFrame(report=report()))

    def _connect(self) -> None:
        self.close()
        # The log says when a manager answers each new connection, not only a new manager.
        self.manager_pid = None
        socket = self._context.socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        # Queue nothing for a manager that is not there: stale reports are worse than none.
        socket.setsockopt(zmq.IMMEDIATE, 1)
        socket.setsockopt(zmq.SNDHWM, 10)
        # Whoever answers at the manager's address cannot make the master hold a huge frame.
        socket.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        socket.setsockopt(zmq.RCVHWM, QUEUED_FRAMES)
        if self.curve is not None:
            self.curve.apply(socket)
        for endpoint in self.endpoints:
            socket.connect(endpoint)
        self.socket = socket

    def _send(self, frame: MasterFrame) -> None:
        if self.socket is None:
            return
        try:
            self.socket.send(frame.encode(), zmq.NOBLOCK)
        except zmq.Again:
            log.debug("no manager connection yet; this heartbeat is dropped")

    def _receive(self, now: float) -> list[ManagerFrame]:
        frames: list[ManagerFrame] = []
        while self.socket is not None:
            try:
                data = self.socket.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            try:
                frame = ManagerFrame.decode(data)
            except LinkFrameError as exc:
                log.warning("dropping a frame from the manager: %s", exc)
                continue
            self.heartbeats.on_frame(now)
            if frame.manager_pid != self.manager_pid:
                log.info("manager pid %d answers", frame.manager_pid)
                self.manager_pid = frame.manager_pid
            frames.append(frame)
        return frames


class ManagedMaster(Master):
    """A master that takes its slot map from the manager (its tick also polls the link)."""

    def __init__(self, config: ClusterConfig, *, manager_endpoints: Sequence[str], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.manager_link = ManagerLink(
            manager_endpoints,
            Heartbeats.for_interval(
                config.manager.heartbeat_interval_s, config.manager.heartbeat_liveness
            ),
            curve=client_curve(config),
            max_message_bytes=config.manager.max_message_bytes,
        )
        self.manager_slots: dict[int, str] | None = None
        # The version of the manager's queue settings in force ("": this host's own file's).
        self.queues_version = ""
        self._slots_told: tuple[tuple[str, str], ...] = ()

    def tick(self, now: float) -> None:
        super().tick(now)
        if self.stopping:
            return
        slots_now = tuple(sorted((s.assignment.queue, s.state) for s in self.slots.values()))
        if slots_now != self._slots_told:
            self._slots_told = slots_now
            self.manager_link.heartbeats.report_soon(now)
        for frame in self.manager_link.poll(now, lambda: self.report(now)):
            if frame.queues is not None and frame.queues_version != self.queues_version:
                told = apply_queues(self, frame.queues, now)
                self.queues_version = frame.queues_version
                log.info("queue settings from the manager's config reload (version %s): %d serving "
                         "slots told in place", frame.queues_version, told)
            if frame.slots is not None and frame.slots != self.manager_slots:
                log.info("slot map from the manager: %s", _describe(frame.slots))
                self.manager_slots = dict(frame.slots)
                self.apply_slot_map(SlotAssignment(slots=self.manager_slots))
                # Now, not at the next tick: a slot given a new queue starts within 200 ms of
                # the map (issue 19), and a tick may be 50 ms away.
                self.reconcile(now)

    def outside_socket(self) -> zmq.Socket[bytes] | None:
        return self.manager_link.socket

    def report(self, now: float) -> HostReport:
        report = super().report(now)
        return report.model_copy(update={"queues_version": self.queues_version}) if self.queues_version else report

    @property
    def managed(self) -> bool:
        return True

    def handle_stop(self, now: float) -> None:
        if not self.stopping:
            self.manager_link.say_goodbye(self.report(now))
        super().handle_stop(now)

    def run(self) -> int:
        try:
            return super().run()
        finally:
            self.manager_link.close()


def parse_endpoints(value: str) -> list[str]:
    """`tcp://a:7500,tcp://b:7500` -> the endpoints (the active manager and its standby)."""
    endpoints = [part.strip() for part in value.split(",") if part.strip()]
    if not endpoints:
        raise ValueError(f"no manager endpoint in {value!r}")
    return endpoints


def _describe(slots: dict[int, str]) -> str:
    counts: dict[str, int] = {}
    for queue in slots.values():
        counts[queue] = counts.get(queue, 0) + 1
    return ", ".join(f"{queue} x{n}" for queue, n in sorted(counts.items())) or "no slots"
