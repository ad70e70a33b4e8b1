"""A retarget during a batch (slot/retarget.py): handle_job's loop stops before the next job,
the jobs not started go back with LATER at once, and they owe no rate-limit permit."""
from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

from config.models import RateLimitConfig
from queue_server.protocol.replies import Job
from slot.beacon import Assignment
from slot.handler import Handler, Outcome, SlotJob, handler
from slot.loop import SlotLoop, StepKind
from slot.memory import MemoryUsage
from slot.permits import RateLimitHook
from slot.pulsar.client import PermitClient
from slot.retarget import AssignmentInbox, GivingBack
from tests.slot.test_slot_loop import FakeLeases, FakeSource

MB = 1024 * 1024
INBOX = AssignmentInbox("one_by_one")


def assignment(queue: str) -> Assignment:
    return Assignment(queue=queue, batch_size=5, lock_timeout_s=2.0, private_dirty_limit_bytes=500 * MB)


class OneByOne(Handler):
    """The default handle(): the master's retarget to `elsewhere` comes during job 2."""

    queue = "one_by_one"
    ran: list[int] = []

    def handle_job(self, job: SlotJob) -> None:
        self.ran.append(job.id)
        if job.id == 2:
            INBOX.put(assignment("elsewhere"))


class WholeBatch(OneByOne):
    """A handle() of its own: its batch is one unit, finished whatever comes."""

    queue = "whole_batch"

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        for job in jobs:
            self.handle_job(job)


class Elsewhere(OneByOne):
    queue = "elsewhere"


def loop_on(queue: str, source: FakeSource, leases: FakeLeases | None = None) -> SlotLoop:
    global INBOX
    OneByOne.ran = []
    INBOX = AssignmentInbox(queue)
    return SlotLoop(
        assignment=assignment(queue),
        handlers={"one_by_one": OneByOne, "whole_batch": WholeBatch, "elsewhere": Elsewhere},
        source=source,
        clock=iter(float(n) for n in range(1000)).__next__,
        read_memory=lambda: MemoryUsage(0, 0, 0),
        take_assignments=INBOX.take,
        moving=lambda: INBOX.moving,
        leases=leases,
        rng=random.Random(7),
    )


def ready(queue: str, count: int, *, first_id: int = 1) -> list[Job]:
    return [Job(queue, first_id + n, 0, b"x", None, f"k{first_id + n}", 1) for n in range(count)]


def test_a_retarget_during_job_2_gives_back_jobs_3_to_5_at_once_and_the_slot_moves() -> None:
    source = FakeSource(ready={"one_by_one": ready("one_by_one", 5),
                               "elsewhere": ready("elsewhere", 1, first_id=9)})
    leases = FakeLeases(source)
    loop = loop_on("one_by_one", source, leases)
    assert loop.step(0.0).kind is StepKind.BATCH
    assert OneByOne.ran == [1, 2]
    assert source.done_calls == [[1, 2]]
    # LATER without a delay: the hand-out taken back, no attempt charged, ready at once.
    assert source.later_calls == [([3, 4, 5], None)]
    # The master heard of each give-back before the acknowledgement (if the slot dies now).
    assert [note[1] for note in leases.notes if note[0] == "resolved"] == [[3], [4], [5]]
    assert loop.step(1.0).kind is StepKind.BATCH
    assert source.fetches[-1][0] == "elsewhere" and OneByOne.ran == [1, 2, 9]


def test_a_handle_of_its_own_finishes_its_batch_before_the_slot_moves() -> None:
    source = FakeSource(ready={"whole_batch": ready("whole_batch", 5)})
    loop = loop_on("whole_batch", source)
    loop.step(0.0)
    assert OneByOne.ran == [1, 2, 3, 4, 5]
    assert source.done_calls == [[1, 2, 3, 4, 5]] and source.later_calls == []


def test_the_newest_assignment_decides_whether_the_slot_moves() -> None:
    inbox = AssignmentInbox("a")
    inbox.put(assignment("b"))
    assert inbox.moving
    inbox.put(assignment("a"))  # sent back before it went: nothing to give back
    assert not inbox.moving
    assert [a.queue for a in inbox.take()] == ["b", "a"]
    inbox.put(assignment("a"))  # a new batch size, the same queue
    assert not inbox.moving
    inbox.take()
    inbox.put(assignment("b"))
    assert [a.queue for a in inbox.take()] == ["b"] and not inbox.moving
    inbox.put(assignment("a"))
    assert inbox.moving


@handler("give_back_probe")
class GiveBackProbe(Handler):
    def handle(self, jobs: Sequence[SlotJob]) -> None:
        raise AssertionError("not run in these tests")


def test_jobs_given_back_take_no_permit_now_nor_owe_one_later(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str],
) -> None:
    endpoint = pulsar({"give_back_probe": RateLimitConfig(permits=100, period_s=1.0, margin=0)})
    batch = [SlotJob("give_back_probe", i, 0, b"x", None) for i in range(1, 6)]
    moving = False
    with PermitClient(endpoint) as client:
        paced = RateLimitHook(client, {"give_back_probe": "give_back_probe"})("give_back_probe", batch)
        view = GivingBack(paced, batch=batch, moving=lambda: moving)
        for job in view:
            if job.id == 2:
                moving = True
    assert view.given_back == 3
    assert [job.outcome for job in batch] == [Outcome.DONE] * 2 + [Outcome.LATER] * 3
    assert paced.unreached() == 0  # type: ignore[attr-defined]
