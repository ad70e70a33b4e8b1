"""The store against a plain model: counters, order, and replay of its own records."""
from __future__ import annotations

import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from queue_server.protocol.keyed import is_retry_wait
from queue_server.protocol.retry import QueuePolicy, RetryPolicy
from queue_server.server import replay, snapshot
from queue_server.server.store import Store

QUEUES = ("a", "b", "c")
# Queue a: two attempts, two dead jobs kept at most (drops happen); the others: defaults.
POLICIES = {"a": QueuePolicy(RetryPolicy(max_attempts=2, retry_base_s=0.5, retry_max_s=2.0), dead_max=2)}
ITEMS = (None, "x", "y")


def observable(store: Store) -> dict[str, object]:
    """What clients can see: per queue the ready jobs in hand-out order, delayed, running."""
    view: dict[str, object] = {}
    for name, state in sorted(store.queues.items()):
        if not state.holds_jobs:
            continue  # a queue that held jobs once and is empty now is not part of the state
        ready = [  # (entries taken out of turn, TTL or DELETE, wait in their level as gone)
            (priority, entry[0], entry[1], entry[3], entry[4])
            for priority in sorted(state.levels, reverse=True)
            for entry in state.levels[priority]
            if id(entry) not in state.gone
        ]
        view[name] = (ready, state.delayed, state.failed, state.running)
    dead = {name: [(d.key, d.data, d.item, d.attempts, d.error, d.died_at) for d in state.dead.values()]
            for name, state in sorted(store.queues.items()) if state.dead}
    delayed = [entry[2:] for entry in store.delayed_jobs()]
    running = sorted((job_id, job.queue.name, job.data, job.key, job.attempts, job.managed,
                      job.history) for job_id, job in store.running.items())
    return {"queues": view, "running": running, "totals": store.totals(), "items": dict(store.items),
            "dead": dead, "delayed": delayed, "keys": {k: store.state_of(k) for k in store.keys},
            "next_key": store.next_key}


def recount(store: Store) -> tuple[int, int, int, int]:
    holding = classes = waiting = 0
    for state in store.queues.values():
        ready = sum(len(level) for level in state.levels.values())
        assert ready - len(state.gone) == state.ready
        running = sum(1 for job in store.running.values() if job.queue is state)
        assert running == state.running
        waiting += state.ready + state.delayed
        classes += len(state.waiting_by_priority)
        holding += state.ready + state.delayed + state.running > 0
        assert sum(state.waiting_by_priority.values()) == state.ready + state.delayed
    return holding, classes, waiting, len(store.running)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000_000.0
        self.store = Store(rng=random.Random(7), policies=POLICIES)
        self.log: list[bytes] = []
        self.serial = 0

    def _collect(self) -> None:
        self.log.extend(self.store.drain_changes())
        self.store.woken.clear()
        self.store.idled.clear()

    @rule(queue=st.sampled_from(QUEUES), priority=st.integers(-2, 2), item=st.sampled_from(ITEMS),
          delay=st.sampled_from([None, None, 0.5, 3.0]))
    def put(self, queue: str, priority: int, item: str | None, delay: float | None) -> None:
        self.serial += 1
        until = self.now + delay if delay else None
        self.store.put(queue, priority, b"%d" % self.serial, item, self.now, until=until)
        self._collect()

    @rule(queue=st.sampled_from(QUEUES), key=st.sampled_from(["k1", "k2", "k3"]))
    def put_unique(self, queue: str, key: str) -> None:
        state = self.store.state_of(key)
        if state is not None and state != "dead":
            return  # the server answers EXISTS and adds nothing
        self.serial += 1
        assert self.store.put(queue, 0, b"%d" % self.serial, None, self.now, key=key) == key
        assert self.store.state_of(key) == "ready"
        self._collect()

    @rule(names=st.sampled_from([None, ("a",), ("a", "b"), ("c",)]), count=st.integers(1, 3),
          expire=st.sampled_from([None, 0.0, 1.0, 5.0]), then_done=st.sampled_from([None, True, False]),
          managed=st.booleans())
    def take(self, names: tuple[str, ...] | None, count: int, expire: float | None,
             then_done: bool | None, managed: bool) -> None:
        before = {name: state.ready for name, state in self.store.queues.items()}
        jobs = self.store.take(names, count, self.now, expire, then_done if expire is not None else None,
                               managed)
        ready_before = sum(before.get(n, 0) for n in (names or QUEUES))
        assert len(jobs) <= min(count, ready_before)  # a solo job ends a batch
        assert bool(jobs) == bool(ready_before)
        for job in jobs:
            assert job.id > 0 and self.store.running[job.id] is job
        self._collect()

    @precondition(lambda self: bool(self.store.running))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.store.running)))
        job = self.store.running[job_id]
        (result,) = self.store.done([job_id])
        assert result.found
        assert result.queue_finished == (not job.queue.holds_jobs)
        assert result.item_finished == (job.item is not None and job.item not in self.store.items)
        self._collect()

    @precondition(lambda self: bool(self.store.running))
    @rule(data=st.data(), delay=st.sampled_from([None, 2.0]))
    def later(self, data: st.DataObject, delay: float | None) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.store.running)))
        until = self.now + delay if delay else None
        assert self.store.later([job_id], self.now, until) == [True]
        assert job_id not in self.store.running
        self._collect()

    @precondition(lambda self: bool(self.store.running))
    @rule(data=st.data(), delay=st.sampled_from([None, 0.0, 2.0]), dead=st.booleans(), solo=st.booleans())
    def fail(self, data: st.DataObject, delay: float | None, dead: bool, solo: bool) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.store.running)))
        job = self.store.running[job_id]
        outcome = self.store.fail(job_id, b"error %d" % job_id, self.now, delay_s=None if dead else delay,
                                  dead=dead, solo=solo)
        # An explicit delay is the client's own policy: retried whatever the count.
        exhausted = delay is None and job.attempts >= self.store.policy(job.queue.name).retry.max_attempts
        assert (outcome is None) == (dead or exhausted)
        assert self.store.state_of(job.key) in ("dead", None) if outcome is None else True
        self._collect()

    @precondition(lambda self: bool(self.store.running))
    @rule(data=st.data(), expire=st.sampled_from([None, 0.5, 3.0]))
    def touch(self, data: st.DataObject, expire: float | None) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.store.running)))
        assert self.store.touch([job_id, 10**9], self.now, expire) == [True, False]
        self._collect()

    @rule(queue=st.sampled_from(QUEUES), data=st.data(), all_dead=st.booleans())
    def retry(self, queue: str, data: st.DataObject, all_dead: bool) -> None:
        if all_dead:
            dead = len(self.store.queues[queue].dead) if queue in self.store.queues else 0
            assert self.store.retry_all(queue, "dead", self.now) == dead
        else:
            key = data.draw(st.sampled_from(sorted(map(str, self.store.keys)) or ["none"]))
            typed = int(key) if key.isdigit() else key
            self.store.retry(queue, [typed], self.now)
        self._collect()

    @rule(queue=st.sampled_from(QUEUES), data=st.data())
    def delete(self, queue: str, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(map(str, self.store.keys)) or ["none"]))
        typed = int(key) if key.isdigit() else key
        before = self.store.state_of(typed)
        [outcome] = self.store.delete(queue, [typed])
        if outcome == "ok":
            assert self.store.state_of(typed) is None and before != "running"
        self._collect()

    @rule(seconds=st.sampled_from([0.1, 1.0, 4.0]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds
        self.store.fire_due(self.now)
        self._collect()

    @rule()
    def unknown_ids_are_not_found(self) -> None:
        assert self.store.done([10**9]) == [self.store.done([10**9])[0]]
        assert not self.store.done([10**9])[0].found

    @invariant()
    def counters_match_a_recount(self) -> None:
        totals = self.store.totals()
        assert (totals.queues, totals.priorities, totals.jobs, totals.running) == recount(self.store)

    @invariant()
    def replaying_the_records_rebuilds_the_same_store(self) -> None:
        rebuilt = Store(rng=random.Random(7))
        for command in replay.iter_records(b"".join(self.log)):
            replay.apply(rebuilt, command, self.now)
        assert observable(rebuilt) == observable(self.store)
        assert rebuilt.next_id == self.store.next_id

    @invariant()
    def failed_and_dead_counts_match_a_recount(self) -> None:
        for name, state in self.store.queues.items():
            failed = [e for e in self.store.delayed_jobs() if e[2] == name and is_retry_wait(e[7])]
            assert state.failed == len(failed)
            assert len(state.dead) <= self.store.policy(name).dead_max

    @invariant()
    def a_snapshot_round_trips(self) -> None:
        copy = snapshot.decode(snapshot.encode(self.store), self.now)
        assert observable(copy) == observable(self.store)
        assert copy.next_id == self.store.next_id and copy.next_item == self.store.next_item


StoreMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestStoreAgainstModel = StoreMachine.TestCase


def test_highest_priority_first_then_fifo_within_a_priority() -> None:
    store = Store()
    for priority, data in [(1, b"low1"), (5, b"high1"), (1, b"low2"), (5, b"high2")]:
        store.put("q", priority, data, None, 0.0)
    taken = store.take(("q",), 4, 0.0, None, None)
    assert [job.data for job in taken] == [b"high1", b"high2", b"low1", b"low2"]


def test_a_priority_that_keeps_emptying_does_not_grow_the_heap() -> None:
    store = Store()
    store.put("q", 10, b"anchor", None, 0.0)
    for _ in range(1000):
        store.put("q", 5, b"x", None, 0.0)
        store.later([store.take(("q",), 1, 0.0, None, None)[0].id], 0.0)  # takes the anchor
        store.take(("q",), 1, 0.0, None, None)
        store.done(list(store.running))
        store.put("q", 10, b"anchor", None, 0.0)
    assert len(store.queues["q"].heap) <= 3


def test_random_choice_is_spread_over_non_empty_queues() -> None:
    store = Store(rng=random.Random(1))
    for _ in range(2000):
        store.put("big", 0, b"x", None, 0.0)
    for _ in range(2000):
        store.put("small", 0, b"x", None, 0.0)
    picked = [store.take(None, 1, 0.0, None, None)[0].queue.name for _ in range(1000)]
    assert 400 < picked.count("big") < 600
