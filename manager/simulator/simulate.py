"""Discrete-event cluster simulator: virtual time, seeded randomness, the real planner in the loop.

Events sit in a heap ordered by (time, sequence). Every policy (the planner, the baselines)
sees the same job stream, starts from the same static map, and gets the same window stats
a manager would read: waiting jobs, jobs done, busy and slot lifetime seconds.
The jobs, slots and counters are manager/simulator/world.py; the policies' interface is
manager/simulator/policy.py.
"""
from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Mapping, Sequence

from manager.simulator.baselines import fill, static_counts
from manager.simulator.policy import PlannerPolicy, Policy
from manager.simulator.report import QueueResult, SimResult, percentile
from manager.simulator.scenario import Scenario
from manager.simulator.world import Job, Phase, QueueBooks, SimSlot, generate_jobs
from manager.storage.model import HostCapacity, Move, MoveKind, QueueStats, SlotMap

ARRIVAL, READY, DONE, PLAN, HOST_DOWN, HOST_UP, HOST_SEEN, EXPIRE, BURST = range(9)


class Simulation:
    def __init__(self, scenario: Scenario, policy: Policy, jobs: Mapping[str, list[Job]]) -> None:
        self.scenario = scenario
        self.policy = policy
        self.jobs = jobs
        self.now_s = 0.0
        self.events: list[tuple[float, int, int, object, object]] = []
        self.sequence = 0
        self.books = {q: QueueBooks() for q in sorted(scenario.queues)}
        self.capacity = scenario.host_capacities()
        self.alive = {h: True for h in self.capacity}
        self.seen_alive = dict(self.alive)
        self.slots: dict[str, SimSlot] = {}
        self.host_slots: dict[str, set[str]] = {h: set() for h in self.capacity}
        self.moves = {kind: 0 for kind in MoveKind}
        self.snapshots: deque[tuple[float, dict[str, tuple[float, float, int]]]] = deque()
        self.plan_cpu_s: list[float] = []
        self.burst_moves = 0

    def schedule(self, at_s: float, kind: int, a: object = None, b: object = None) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at_s, self.sequence, kind, a, b))

    def run(self) -> SimResult:
        initial = fill(SlotMap.empty(), static_counts(self.scenario), self.host_list())
        self.apply(initial, count=False, delay_s=0.0)
        for queue, stream in self.jobs.items():
            if stream:
                self.schedule(stream[0][0], ARRIVAL, queue, 0)
        self.schedule(self.scenario.plan_interval_s, PLAN)
        if isinstance(self.policy, PlannerPolicy) and self.policy.burst_check_s > 0:
            self.schedule(self.scenario.plan_interval_s + self.policy.burst_check_s, BURST)
        for index, failure in enumerate(self.scenario.failures):
            for host in self.scenario.failing_hosts(index):
                self.schedule(failure.at_s, HOST_DOWN, host)
                if failure.recover_at_s is not None:
                    self.schedule(failure.recover_at_s, HOST_UP, host)
        self.snapshot()
        handlers = {
            ARRIVAL: self.on_arrival, READY: self.on_ready, DONE: self.on_done,
            PLAN: self.on_plan, HOST_DOWN: self.on_host_down, HOST_UP: self.on_host_up,
            HOST_SEEN: self.on_host_seen, EXPIRE: self.on_expire, BURST: self.on_burst,
        }
        duration_s = self.scenario.duration_s
        while self.events and self.events[0][0] <= duration_s:
            at_s, _, kind, a, b = heapq.heappop(self.events)
            self.now_s = at_s
            handlers[kind](a, b)
        self.now_s = duration_s
        return self.result()


    def on_arrival(self, queue: object, index: object) -> None:
        assert isinstance(queue, str) and isinstance(index, int)
        stream = self.jobs[queue]
        books = self.books[queue]
        books.touch(self.now_s)
        books.waiting.append(stream[index])
        books.backlog_max = max(books.backlog_max, len(books.waiting))
        if index + 1 < len(stream):
            self.schedule(stream[index + 1][0], ARRIVAL, queue, index + 1)
        self.dispatch(queue)

    def dispatch(self, queue: str) -> None:
        books = self.books[queue]
        while books.waiting and books.idle:
            slot = books.idle.popleft()
            if slot.alive and slot.phase is Phase.IDLE and slot.queue == queue:
                self.start_batch(slot)

    def start_batch(self, slot: SimSlot) -> None:
        books = self.books[slot.queue]
        books.touch(self.now_s)
        size = min(self.scenario.queues[slot.queue].batch_size, len(books.waiting))
        slot.batch = [books.waiting.popleft() for _ in range(size)]
        slot.batch_start_s = self.now_s
        slot.phase = Phase.BUSY
        books.busy += 1
        slot.epoch += 1
        self.schedule(self.now_s + sum(j[1] for j in slot.batch), DONE, slot, slot.epoch)

    def on_done(self, slot: object, epoch: object) -> None:
        assert isinstance(slot, SimSlot)
        if not slot.alive or slot.epoch != epoch:
            return
        books = self.books[slot.queue]
        books.touch(self.now_s)
        books.busy -= 1
        books.done += len(slot.batch)
        books.waits_s.extend(slot.batch_start_s - arrived for arrived, _ in slot.batch)
        slot.batch = []
        slot.phase = Phase.IDLE
        if slot.stopping:
            self.remove(slot)
        elif slot.next_queue is not None:
            self.switch(slot, slot.next_queue, self.scenario.retarget_delay_s)
        else:
            self.become_idle(slot)

    def become_idle(self, slot: SimSlot) -> None:
        slot.phase = Phase.IDLE
        if self.books[slot.queue].waiting:
            self.start_batch(slot)
        else:
            self.books[slot.queue].idle.append(slot)

    def on_ready(self, slot: object, epoch: object) -> None:
        assert isinstance(slot, SimSlot)
        if slot.alive and slot.epoch == epoch:
            self.become_idle(slot)

    def on_expire(self, queue: object, batch: object) -> None:
        """A dead slot's batch stays locked until its lock time, then waits again."""
        assert isinstance(queue, str) and isinstance(batch, list)
        books = self.books[queue]
        books.touch(self.now_s)
        books.waiting.extend(batch)
        self.dispatch(queue)


    def switch(self, slot: SimSlot, queue: str, delay_s: float) -> None:
        """Move a slot that is not busy to another queue; it takes jobs after delay_s."""
        old = self.books[slot.queue]
        old.touch(self.now_s)
        old.alive -= 1
        new = self.books[queue]
        new.touch(self.now_s)
        new.alive += 1
        slot.queue = queue
        slot.next_queue = None
        slot.phase = Phase.STARTING
        slot.ready_at_s = max(slot.ready_at_s, self.now_s + delay_s)
        slot.epoch += 1
        self.schedule(slot.ready_at_s, READY, slot, slot.epoch)

    def remove(self, slot: SimSlot) -> None:
        books = self.books[slot.queue]
        books.touch(self.now_s)
        books.alive -= 1
        if slot.phase is Phase.BUSY:
            books.busy -= 1
        slot.alive = False
        del self.slots[slot.slot_id]
        self.host_slots[slot.host].discard(slot.slot_id)

    def on_host_down(self, host: object, _: object) -> None:
        assert isinstance(host, str)
        self.alive[host] = False
        for slot_id in sorted(self.host_slots[host]):
            slot = self.slots[slot_id]
            if slot.phase is Phase.BUSY:
                lock_s = self.scenario.queues[slot.queue].lock_timeout_s
                self.schedule(self.now_s + lock_s, EXPIRE, slot.queue, slot.batch)
            self.remove(slot)
        self.schedule(self.now_s + self.scenario.detect_delay_s, HOST_SEEN, host, False)

    def on_host_up(self, host: object, _: object) -> None:
        assert isinstance(host, str)
        self.alive[host] = True
        self.schedule(self.now_s + self.scenario.detect_delay_s, HOST_SEEN, host, True)

    def on_host_seen(self, host: object, alive: object) -> None:
        assert isinstance(host, str) and isinstance(alive, bool)
        self.seen_alive[host] = alive

    def host_list(self) -> list[HostCapacity]:
        return [HostCapacity(h, c, self.seen_alive[h]) for h, c in sorted(self.capacity.items())]

    def current_map(self) -> SlotMap:
        """The map as the manager last commanded it: pending retargets count, stops do not."""
        hosts: dict[str, dict[str, str]] = {h: {} for h in self.capacity}
        for slot in self.slots.values():
            if not slot.stopping:
                hosts[slot.host][slot.slot_id] = slot.next_queue or slot.queue
        return SlotMap(hosts=hosts)

    def apply(self, moves: Sequence[Move], *, count: bool = True, delay_s: float | None = None) -> None:
        for move in moves:
            if count:
                self.moves[move.kind] += 1
            if move.kind is MoveKind.SPAWN:
                self.spawn(move, self.scenario.spawn_delay_s if delay_s is None else delay_s)
                continue
            slot = self.slots.get(move.slot_id)
            if slot is None:
                continue  # died meanwhile
            if move.kind is MoveKind.STOP:
                if slot.phase is Phase.BUSY:
                    slot.stopping = True
                    slot.next_queue = None
                else:
                    self.remove(slot)
            elif slot.phase is Phase.BUSY:
                slot.next_queue = None if move.to_queue == slot.queue else move.to_queue
            else:
                self.switch(slot, str(move.to_queue), self.scenario.retarget_delay_s)

    def spawn(self, move: Move, delay_s: float) -> None:
        if not self.alive[move.host] or move.slot_id in self.slots:
            return  # the master is gone: the fork never happens
        queue = str(move.to_queue)
        slot = SimSlot(move.slot_id, move.host, queue, ready_at_s=self.now_s + delay_s)
        self.slots[slot.slot_id] = slot
        self.host_slots[move.host].add(slot.slot_id)
        books = self.books[queue]
        books.touch(self.now_s)
        books.alive += 1
        self.schedule(slot.ready_at_s, READY, slot, slot.epoch)


    def snapshot(self) -> None:
        for books in self.books.values():
            books.touch(self.now_s)
        self.snapshots.append(
            (self.now_s, {q: (b.busy_s, b.lifetime_s, b.done) for q, b in self.books.items()})
        )

    def window_stats(self) -> dict[str, QueueStats]:
        self.snapshot()
        while len(self.snapshots) > 2 and self.snapshots[1][0] <= self.now_s - self.scenario.window_s:
            self.snapshots.popleft()
        start_s, start = self.snapshots[0]
        end = self.snapshots[-1][1]
        unreported = self.running_batches_s() if self.scenario.busy_at_batch_end else {}
        return {
            q: QueueStats(
                waiting_jobs=len(self.books[q].waiting),
                jobs_done=end[q][2] - start[q][2],
                busy_s=max(0.0, end[q][0] - start[q][0] - unreported.get(q, 0.0)),
                slot_lifetime_s=end[q][1] - start[q][1],
                window_s=self.now_s - start_s,
            )
            for q in self.books
        }

    def running_batches_s(self) -> dict[str, float]:
        """Per queue, the time its running batches have run so far: busy time a real slot
        reports only when the batch ends."""
        running: dict[str, float] = {}
        for slot in self.slots.values():
            if slot.phase is Phase.BUSY:
                running[slot.queue] = running.get(slot.queue, 0.0) + self.now_s - slot.batch_start_s
        return running

    def on_plan(self, _a: object, _b: object) -> None:
        stats = self.window_stats()
        started = time.process_time()
        moves = self.policy.decide(self.now_s, self.current_map(), stats, self.host_list())
        self.plan_cpu_s.append(time.process_time() - started)
        self.apply(moves)
        self.schedule(self.now_s + self.scenario.plan_interval_s, PLAN)

    def on_burst(self, _a: object, _b: object) -> None:
        """The manager's burst check: the waiting counts now against those at the last plan."""
        assert isinstance(self.policy, PlannerPolicy)
        waiting = {q: len(b.waiting) for q, b in self.books.items()}
        busy = self.running_batches_s()
        idle = [q for q, n in waiting.items() if n == 0 and q not in busy]
        moves = self.policy.burst(self.current_map(), waiting, self.window_stats, self.host_list(), idle)
        self.burst_moves += len(moves)
        self.apply(moves)
        self.schedule(self.now_s + self.policy.burst_check_s, BURST)


    def result(self) -> SimResult:
        end_s = self.scenario.duration_s
        for books in self.books.values():
            books.touch(end_s)
        busy: dict[str, list[float]] = {q: [] for q in self.books}
        for slot in self.slots.values():
            if slot.phase is Phase.BUSY:
                busy[slot.queue].extend(slot.batch_start_s - a for a, _ in slot.batch)
        locked: dict[str, list[float]] = {q: [] for q in self.books}
        for _, _, kind, a, b in self.events:
            if kind == EXPIRE:
                assert isinstance(a, str) and isinstance(b, list)
                locked[a].extend(end_s - arrived for arrived, _ in b)
        queues = {}
        for name, books in self.books.items():
            waits = books.waits_s + busy[name] + locked[name]
            waits.extend(end_s - arrived for arrived, _ in books.waiting)
            waits.sort()
            queues[name] = QueueResult(
                queue=name,
                priority=self.scenario.queues[name].priority,
                jobs=len(self.jobs[name]),
                done=books.done,
                wait_p50_s=percentile(waits, 50),
                wait_p95_s=percentile(waits, 95),
                wait_p99_s=percentile(waits, 99),
                backlog_mean=books.backlog_s / end_s,
                backlog_max=books.backlog_max,
                backlog_end=len(books.waiting),
                slots_mean=books.lifetime_s / end_s,
            )
        busy_s = sum(b.busy_s for b in self.books.values())
        lifetime_s = sum(b.lifetime_s for b in self.books.values())
        return SimResult(
            policy=self.policy.name,
            queues=queues,
            moves={kind.value: n for kind, n in self.moves.items()},
            burst_moves=self.burst_moves,
            utilisation=busy_s / lifetime_s if lifetime_s else 0.0,
            slots_mean=lifetime_s / end_s,
            plan_cpu_ms_mean=1000 * sum(self.plan_cpu_s) / max(len(self.plan_cpu_s), 1),
        )


def simulate(scenario: Scenario, policies: Sequence[Policy]) -> list[SimResult]:
    """Run each policy on the same job stream."""
    jobs = generate_jobs(scenario)
    return [Simulation(scenario, policy, jobs).run() for policy in policies]
