"""The server's periodic chores: the everysec sync, the snapshot child, a snapshot the log
has outgrown, dead and finished jobs past their age, latency observations to bucket, idle
clients."""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from config.periodic import TurnBoundary
from queue_server.server.drained import DrainedQueues
from queue_server.server.faces import Server
from queue_server.server.latency import settle_all
from queue_server.server.liveness import HEARTBEAT_S

log = logging.getLogger("slotmap.queue_server")

HOUSEKEEPING_S = HEARTBEAT_S  # replication heartbeats are one of the chores


class Housekeeping:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.drained = DrainedQueues(server.settings.forget_drained_queues_s)
        # One per step: a step failing every 0.5 s is said once (then once a minute), and
        # one failing never hides another.
        self.turns: dict[str, TurnBoundary] = {}

    def schedule(self) -> None:
        asyncio.get_running_loop().call_later(HOUSEKEEPING_S, self.run)

    def run(self) -> None:
        """Every HOUSEKEEPING_S: the everysec sync, reaping the snapshot child, a snapshot the
        log has outgrown, idle clients. It always comes back: a failing step is logged with
        its traceback (once while it goes on) and tried again next time, so durability
        cannot switch itself off (the log failing stops the server, as in server.py `_flush`)."""
        server = self.server
        if server.log_error is not None:
            return
        try:
            for step in self.steps():
                if server.log_error is not None:
                    return
                with self.turns_of(step.__name__.strip("_")):
                    step()
        finally:
            if server.log_error is None:
                self.schedule()

    def turns_of(self, name: str) -> TurnBoundary:
        turns = self.turns.get(name)
        if turns is None:
            turns = self.turns[name] = TurnBoundary(f"housekeeping: {name}", log=log,
                                                    next_turn=f"tried again in {HOUSEKEEPING_S:.1f} s")
        return turns

    def steps(self) -> list[Callable[[], None]]:
        settings = self.server.settings
        steps: list[Callable[[], None]] = []
        if settings.fsync == "everysec":
            steps.append(self.sync_everysec)
        steps += [self.server.data_dir.reap_snapshot, self.snapshot_if_due, self.drop_aged_dead_jobs,
                  self.drop_aged_finished_jobs, self.settle_latency, self.server.replication_tick]
        if settings.idle_timeout_s:
            steps.append(self.close_idle)
        if self.server.token is not None:
            steps.append(self.close_unauthenticated)
        if settings.forget_drained_queues_s:
            steps.append(self.forget_drained_queues)
        steps.append(self.cut_unsent_output)
        return steps

    def cut_unsent_output(self) -> None:
        if self.server.door.writing_paused:
            self.server.door.cut_unsent_output()

    def forget_drained_queues(self) -> None:
        server = self.server
        forgotten = self.drained.sweep(server.store, server.waiters.waited_on, time.monotonic())
        if forgotten:
            log.debug("forgot %d drained queue(s) (forget_drained_queues_s)", forgotten)

    def close_unauthenticated(self) -> None:
        closed = self.server.door.expire_unauthenticated(time.monotonic())
        if closed:
            log.info("closed %d connection(s) not authenticated within %.1f s (auth_timeout_s)",
                     closed, self.server.settings.auth_timeout_s)

    def sync_everysec(self) -> None:
        try:
            self.server.journal.sync_everysec()
        except OSError as error:
            self.server.log_failed(error)

    def drop_aged_dead_jobs(self) -> None:
        self.server.fire_timers_if_due(dead_ages=True)

    def drop_aged_finished_jobs(self) -> None:
        self.server.prune_finished_jobs()

    def settle_latency(self) -> None:
        """Bucket the hand-outs' and DONEs' buffered seconds (latency.py): what a queue
        holds unbucketed is then at most half a second of its work."""
        observed = self.server.store.observed
        if observed:
            settle_all(observed)
            observed.clear()

    def snapshot_if_due(self) -> None:
        server = self.server
        if server.data_dir.wants_snapshot():  # the log outgrew its bound while a snapshot ran
            if server.flush_records():
                server.start_snapshot()

    def close_idle(self) -> None:
        """Close connections that sent nothing for idle_timeout_s (to within HOUSEKEEPING_S).
        A client blocked in a wait and a replication link are never idle."""
        now = time.monotonic()
        timeout_s = self.server.settings.idle_timeout_s
        closed = 0
        for conn in list(self.server.connections):
            if conn.active or conn.waiter is not None or conn.is_replication_link:
                conn.active = False
                conn.idle_since = now
            elif now - conn.idle_since >= timeout_s and conn.transport is not None:
                conn.close()
                closed += 1
        if closed:
            log.info("closed %d connection(s) that sent nothing for %.1f s (idle_timeout_s)",
                     closed, timeout_s)
