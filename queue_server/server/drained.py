"""Forgetting drained queues: a queue with no job ready, delayed, running or dead and no
client waiting on it by name is dropped once it has stayed so for forget_drained_queues_s.

Why: a producer that made 50,000 queues of one job each left 50,000 empty entries that
STATS, /metrics and the dashboard listed forever. Looking at every queue at once would
stop the event loop (100,000 queues: tens of ms), so each housekeeping tick looks at a
slice of SLICE queues, and a queue's activity (its put and retried counters) tells
whether it was used between two looks. A queue is thus forgotten between
forget_drained_queues_s and that plus one round over all queues (queues / SLICE ticks).
"""
from __future__ import annotations

from collections.abc import Callable

from queue_server.server.store import Store

SLICE = 5000  # queues looked at per housekeeping tick (about 2 ms)


class DrainedQueues:
    def __init__(self, forget_after_s: float) -> None:
        self.forget_after_s = forget_after_s
        # Queue -> (when first seen drained, its activity then): forgotten once the
        # activity has not moved for forget_after_s.
        self.seen: dict[str, tuple[float, int]] = {}
        self._round: list[str] = []  # names still to look at in this round

    def sweep(self, store: Store, waited_on: Callable[[str], bool], now: float,
              budget: int = SLICE) -> int:
        """Look at up to `budget` queues; return how many were forgotten."""
        if not self._round:
            self._round = list(store.queues)
            for name in [name for name in self.seen if name not in store.queues]:
                del self.seen[name]  # forgotten or replaced meanwhile (CLONE)
        queues, seen, round_ = store.queues, self.seen, self._round
        forgotten = 0
        for _ in range(min(budget, len(round_))):
            name = round_.pop()
            state = queues.get(name)
            if state is None:
                continue
            if state.ready or state.delayed or state.running or state.dead or waited_on(name):
                seen.pop(name, None)
                continue
            activity = state.put + state.retried
            mark = seen.get(name)
            if mark is None or mark[1] != activity:
                seen[name] = (now, activity)
            elif now - mark[0] >= self.forget_after_s and store.forget_queue(name):
                del seen[name]
                forgotten += 1
        return forgotten
