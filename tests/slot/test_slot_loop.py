"""The slot loop's step() against a fake queue server: batches, acks, errors, retargets, memory."""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from queue_server.protocol.replies import Job
from slot.beacon import Assignment, SlotPhase
from slot.exit_codes import SlotExit
from slot.handler import Handler, SlotJob
from slot.loop import SlotLoop, SourceUnavailable, StepKind
from slot.memory import MemoryUsage, MemoryWatch
from slot.outcomes import Failure
from slot.reply_key import Reply

MB = 1024 * 1024


@dataclass
class FakeSource:
    ready: dict[str, list[Job]] = field(default_factory=dict)
    done_calls: list[list[int]] = field(default_factory=list)
    later_calls: list[tuple[list[int], float | None]] = field(default_factory=list)
    # LATER ... FRONT: the jobs a retarget gave back.
    front_calls: list[list[int]] = field(default_factory=list)
    replies: list[tuple[str, list[Reply]]] = field(default_factory=list)
    reply_ttls: list[float | None] = field(default_factory=list)
    fail_calls: list[list[Failure]] = field(default_factory=list)
    fetches: list[tuple[str, int, float]] = field(default_factory=list)
    unavailable: bool = False

    def fetch(self, queue: str, *, count: int, lock_s: float) -> Sequence[Job] | None:
        self.fetches.append((queue, count, lock_s))
        if self.unavailable:
            raise SourceUnavailable("connection refused")
        jobs = self.ready.get(queue, [])
        if not jobs:
            return None  # what a woken wait looks like
        taken, self.ready[queue] = jobs[:count], jobs[count:]
        return taken

    def done(self, ids: Sequence[int]) -> None:
        self.done_calls.append(list(ids))

    def later(self, ids: Sequence[int], *, delay_s: float | None, front: bool = False) -> None:
        if front:
            self.front_calls.append(list(ids))
        else:
            self.later_calls.append((list(ids), delay_s))

    def fail(self, failures: Sequence[Failure]) -> int:
        self.fail_calls.append(list(failures))
        return sum(f.dead for f in failures)

    def reply(self, queue: str, replies: Sequence[Reply], *, ttl_s: float | None = None) -> None:
        self.replies.append((queue, list(replies)))
        self.reply_ttls.append(ttl_s)


@dataclass
class FakeLeases:
    """Records what the master would learn, and what the source had acknowledged by then."""

    source: FakeSource
    notes: list[tuple[str, list[int], int]] = field(default_factory=list)

    def hold(self, jobs: Sequence[SlotJob], *, lock_s: float, in_order: bool = False) -> None:
        self.notes.append(("hold", [j.id for j in jobs], len(self.source.done_calls)))

    def release(self) -> None:
        self.notes.append(("release", [], len(self.source.done_calls)))

    def started(self) -> None:
        self.notes.append(("started", [], len(self.source.done_calls)))

    def resolved(self, job: SlotJob) -> None:
        self.notes.append(("resolved", [job.id], len(self.source.done_calls)))

    def handled(self) -> None:
        self.notes.append(("handled", [], len(self.source.done_calls)))

    def given_back(self, jobs: Sequence[SlotJob]) -> None:
        self.notes.append(("given_back", [j.id for j in jobs], len(self.source.done_calls)))

    def running_marker(self) -> memoryview | None:
        return None


class Recorder(Handler):
    events: ClassVar[list[str]] = []
    batches: ClassVar[list[list[int]]] = []

    def setup(self) -> None:
        self.events.append(f"setup {self.queue}")

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        self.batches.append([j.id for j in jobs])
        for one in jobs:
            if one.data == b"later":
                one.later(delay_s=5)
            elif one.data == b"call":
                one.reply(b"answer")
            elif one.data == b"boom":
                raise RuntimeError("handler bug")

    def teardown(self) -> None:
        self.events.append(f"teardown {self.queue}")


class RecorderA(Recorder):
    queue = "a"


class RecorderB(Recorder):
    queue = "b"


class BrokenSetup(Handler):
    queue = "broken"

    def setup(self) -> None:
        raise ConnectionError("database down")


def jobs(queue: str, *datas: bytes, first_id: int = 1, attempt: int = 1) -> list[Job]:
    return [Job(queue, first_id + n, 0, data, "_9", f"_{first_id + n}", attempt)
            for n, data in enumerate(datas)]


def assignment(queue: str = "a", *, batch: int = 3, limit: int = 500 * MB) -> Assignment:
    return Assignment(queue=queue, batch_size=batch, lock_timeout_s=2.0, private_dirty_limit_bytes=limit)


def make_loop(source: FakeSource, *, limit: int = 500 * MB, dirty: int = 10 * MB,
              inbox: list[Assignment] | None = None, leases: FakeLeases | None = None) -> SlotLoop:
    Recorder.events, Recorder.batches = [], []
    pending = inbox if inbox is not None else []

    def take() -> list[Assignment]:
        taken = list(pending)
        pending.clear()
        return taken

    return SlotLoop(
        assignment=assignment(limit=limit),
        handlers={"a": RecorderA, "b": RecorderB, "broken": BrokenSetup},
        source=source,
        clock=iter(float(n) for n in range(1000)).__next__,
        read_memory=lambda: MemoryUsage(rss_bytes=0, pss_bytes=dirty, private_dirty_bytes=dirty),
        memory_watch=MemoryWatch(every_jobs=1, every_s=0.0),
        take_assignments=take,
        leases=leases,
        rng=random.Random(7),
    )


def test_a_batch_is_fetched_with_count_and_lock_time_and_done_in_one_request() -> None:
    source = FakeSource(ready={"a": jobs("a", b"x", b"y", b"z", b"w")})
    loop = make_loop(source)
    result = loop.step(0.0)
    assert (result.kind, result.jobs) == (StepKind.BATCH, 3)
    assert source.fetches == [("a", 3, 2.0)]
    assert source.done_calls == [[1, 2, 3]]
    assert loop.stats.jobs_done == 3 and loop.stats.batches == 1
    assert loop.stats.busy_s == 1.0  # fake clock: one tick per call


def test_postponed_jobs_go_back_with_their_delay_and_replies_are_put_first() -> None:
    source = FakeSource(ready={"a": jobs("a", b"x", b"later", b"call")})
    loop = make_loop(source)
    loop.step(0.0)
    assert source.replies == [("a_reply", [Reply(3, "_9", b"answer")])]
    assert source.reply_ttls == [600.0]  # Handler.reply_ttl_s: an untaken reply goes (PUT ... TTL)
    assert source.later_calls == [([2], 5)]
    assert source.done_calls == [[1, 3]]
    assert loop.stats.jobs_later == 1


def test_a_handler_exception_fails_the_unresolved_jobs_solo_and_keeps_the_resolved_ones() -> None:
    source = FakeSource(ready={"a": jobs("a", b"later", b"x", b"boom") + jobs("a", b"ok", first_id=10)})
    loop = make_loop(source)
    assert loop.step(0.0).kind is StepKind.BATCH
    assert source.later_calls == [([1], 5)] and source.done_calls == []
    [failures] = source.fail_calls
    assert [(f.id, f.solo, f.dead, f.delay_s) for f in failures] == [(2, True, False, None), (3, True, False, None)]
    assert failures[0].error.startswith("Traceback (most recent call last):")
    assert failures[0].error.endswith("RuntimeError: handler bug")
    assert (loop.stats.errors, loop.stats.jobs_failed) == (1, 2)
    assert loop.step(1.0).kind is StepKind.BATCH
    assert source.done_calls == [[10]]


class OneByOne(Handler):
    """handle_job: an exception fails that job alone."""

    def handle_job(self, job: SlotJob) -> None:
        if job.data == b"bad":
            raise ValueError(f"cannot handle {job.key}")
        if job.data == b"give up":
            job.fail("not worth retrying", dead=True)


def test_handle_job_isolates_a_raising_job_the_rest_done_in_one_request() -> None:
    batch = jobs("a", *[b"ok"] * 12, b"bad", *[b"ok"] * 7)
    source = FakeSource(ready={"a": batch})
    loop = make_loop(source)
    loop.handlers = {"a": OneByOne}
    loop.assignment = assignment(batch=20)
    loop.step(0.0)
    assert source.done_calls == [[j.id for j in batch if j.data == b"ok"]]
    [[failed]] = source.fail_calls
    assert (failed.id, failed.solo, failed.dead) == (13, False, False)
    assert "ValueError: cannot handle _13" in failed.error and "handle_job" in failed.error
    assert loop.stats.errors == 0


class Impatient(OneByOne):
    max_attempts = 3
    retry_base_s = 2.0


def test_a_handler_retry_policy_decides_the_delay_and_the_death_in_the_slot() -> None:
    source = FakeSource(ready={"a": jobs("a", b"bad", b"bad", first_id=1, attempt=2)
                           + jobs("a", b"bad", b"give up", first_id=3, attempt=3)})
    loop = make_loop(source)
    loop.handlers = {"a": Impatient}
    loop.assignment = assignment(batch=4).model_copy(update={"retry_max_s": 100.0})
    loop.step(0.0)
    [failures] = source.fail_calls
    second, _, third, given_up = failures
    # Attempt 2 failed: 2 s doubled once, plus up to 25% jitter; attempt 3 of 3: dead.
    assert second.delay_s is not None and 4.0 <= second.delay_s <= 5.0 and not second.dead
    assert (third.delay_s, third.dead) == (None, True)
    assert (given_up.dead, given_up.error) == (True, "not worth retrying")
    assert loop.stats.jobs_dead == 2


def test_without_a_handler_policy_the_queue_server_decides() -> None:
    source = FakeSource(ready={"a": jobs("a", b"bad", attempt=25)})
    loop = make_loop(source)
    loop.handlers = {"a": OneByOne}
    loop.step(0.0)
    [[failed]] = source.fail_calls
    assert (failed.delay_s, failed.dead) == (None, False)


def test_the_master_learns_the_batch_before_the_handler_and_its_release_after_the_ack() -> None:
    source = FakeSource(ready={"a": jobs("a", b"x", b"y")})
    leases = FakeLeases(source)
    loop = make_loop(source, leases=leases)
    loop.step(0.0)
    assert leases.notes == [("started", [], 0), ("hold", [1, 2], 0), ("handled", [], 0), ("release", [], 1)]
    assert Recorder.batches == [[1, 2]]


def test_each_outcome_goes_to_the_master_as_the_handler_decides_it() -> None:
    source = FakeSource(ready={"a": jobs("a", b"x", b"later", b"call")})
    leases = FakeLeases(source)
    loop = make_loop(source, leases=leases)
    loop.step(0.0)
    # Before the acknowledgement (no DONE sent yet): a crash after them would not undo them.
    assert leases.notes == [("started", [], 0), ("hold", [1, 2, 3], 0), ("resolved", [2], 0),
                            ("resolved", [3], 0), ("handled", [], 0), ("release", [], 1)]


def test_setup_runs_once_per_slot_and_teardown_on_close() -> None:
    source = FakeSource(ready={"a": jobs("a", *[b"x"] * 6)})
    loop = make_loop(source)
    loop.step(0.0)
    loop.step(1.0)
    loop.close()
    assert Recorder.events == ["setup a", "teardown a"]
    assert loop.stats.phase is SlotPhase.EXITING


def test_retarget_switches_queue_and_handler_without_a_new_process() -> None:
    inbox: list[Assignment] = []
    source = FakeSource(ready={"a": jobs("a", b"x"), "b": jobs("b", b"y", first_id=5)})
    loop = make_loop(source, inbox=inbox)
    loop.step(0.0)
    inbox.append(assignment("b"))
    result = loop.step(1.0)
    assert result.kind is StepKind.BATCH
    assert source.fetches[-1][0] == "b"
    assert Recorder.events == ["setup a", "teardown a", "setup b"]
    assert loop.stats.queue == "b"


def test_stop_request_exits_at_the_next_step() -> None:
    source = FakeSource(ready={"a": jobs("a", b"x")})
    loop = make_loop(source)
    loop.step(0.0)
    loop.request_stop()
    assert loop.step(1.0).exit_code is SlotExit.STOPPED


def test_an_interrupted_wait_is_reported_as_woken() -> None:
    assert make_loop(FakeSource()).step(0.0).kind is StepKind.WOKEN


def test_over_the_private_dirty_limit_the_slot_acks_its_batch_then_exits() -> None:
    source = FakeSource(ready={"a": jobs("a", b"x", b"y")})
    loop = make_loop(source, limit=100 * MB)
    readings = iter([50 * MB, 101 * MB])  # after setup(), then after the batch
    loop.read_memory = lambda: MemoryUsage(0, 0, next(readings))
    result = loop.step(0.0)
    assert result.exit_code is SlotExit.MEMORY_LIMIT
    assert source.done_calls == [[1, 2]]


def test_a_slot_whose_setup_alone_passes_the_limit_is_recycled_only_when_it_grows_by_the_limit() -> None:
    source = FakeSource(ready={"a": jobs("a", b"x", b"y", b"z", b"w", b"v", b"u")})
    loop = make_loop(source, limit=100 * MB)
    readings = iter([150 * MB, 240 * MB, 251 * MB])  # after setup(), then after each batch
    loop.read_memory = lambda: MemoryUsage(0, 0, next(readings))
    assert loop.step(0.0).kind is StepKind.BATCH  # 240 MB: over the limit, not over setup + limit
    assert loop.step(1.0).exit_code is SlotExit.MEMORY_LIMIT
    assert source.done_calls == [[1, 2, 3], [4, 5, 6]]


def test_no_handler_and_failed_setup_exit_with_their_named_codes() -> None:
    loop = make_loop(FakeSource())
    loop.assignment = assignment("unknown")
    assert loop.step(0.0).exit_code is SlotExit.NO_HANDLER
    loop = make_loop(FakeSource())
    loop.assignment = assignment("broken")
    assert loop.step(0.0).exit_code is SlotExit.SETUP_FAILED


@pytest.mark.parametrize("failures", [1, 3])
def test_an_unreachable_server_is_retried_with_growing_delays(failures: int) -> None:
    loop = make_loop(FakeSource(unavailable=True))
    delays = [loop.step(float(n)).retry_after_s for n in range(failures)]
    assert delays == sorted(delays) and delays[0] > 0
