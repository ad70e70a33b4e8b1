"""A retarget during a batch (slot/retarget.py): handle_job's loop stops before the next job,
the jobs not started go back to the head of their queue in their order (one LATER ... FRONT),
noted to the master in one write before the acknowledgement, and they owe no rate-limit
permit."""
from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping, Sequence

from config.models import RateLimitConfig
from master.lifecycle import Lease
from master.settle import Done, Later, settle
from queue_server.protocol.replies import Job
from slot.beacon import Assignment
from slot.done_map import HANDLED, DoneMap
from slot.handler import Handler, Outcome, SlotJob, handler
from slot.leases import LeaseReporter
from slot.loop import SlotLoop, StepKind
from slot.memory import MemoryUsage
from slot.outcomes import acknowledgement
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
    # One LATER ... FRONT: the hand-outs taken back, no attempt charged, ready at once at the
    # head of the queue in their order (not behind the jobs put since).
    assert source.front_calls == [[3, 4, 5]] and source.later_calls == []
    # The master heard of them all at once, before the acknowledgement (if the slot dies now).
    assert [n for n in leases.notes if n[0] in ("resolved", "given_back")] == [("given_back", [3, 4, 5], 0)]
    assert loop.step(1.0).kind is StepKind.BATCH
    assert source.fetches[-1][0] == "elsewhere" and OneByOne.ran == [1, 2, 9]


def test_a_handle_of_its_own_finishes_its_batch_before_the_slot_moves() -> None:
    source = FakeSource(ready={"whole_batch": ready("whole_batch", 5)})
    loop = loop_on("whole_batch", source)
    loop.step(0.0)
    assert OneByOne.ran == [1, 2, 3, 4, 5]
    assert source.done_calls == [[1, 2, 3, 4, 5]] and source.later_calls == source.front_calls == []


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
    assert [job.outcome for job in batch] == [Outcome.DONE] * 2 + [Outcome.GIVEN_BACK] * 3
    assert paced.unreached() == 0  # type: ignore[attr-defined]


def test_jobs_resolved_before_the_retarget_keep_their_outcome_and_only_the_rest_go_to_the_front() -> None:
    batch = [SlotJob("q", i, 0, b"x", None) for i in range(1, 6)]
    batch[3].later(delay_s=5.0)  # postponed by a before_batch hook: not the retarget's to give back
    noted: list[list[int]] = []
    moving = False
    view = GivingBack(batch[:3] + batch[4:], batch=batch, moving=lambda: moving,
                      noted=lambda jobs: noted.append([job.id for job in jobs]))
    for _job in view:
        moving = True
    assert view.given_back == 3 and noted == [[2, 3, 5]]
    ack = acknowledgement(batch, policy=None, rng=random.Random(1))
    assert (ack.done, ack.front, ack.later) == ([1], [2, 3, 5], {5.0: [4]})


def test_no_retarget_notes_nothing_and_acknowledges_as_before() -> None:
    batch = [SlotJob("q", i, 0, b"x", None) for i in range(1, 4)]
    noted: list[list[int]] = []
    view = GivingBack(batch, batch=batch, moving=lambda: False,
                      noted=lambda jobs: noted.append([job.id for job in jobs]))
    assert [job.id for job in view] == [1, 2, 3]
    assert view.given_back == 0 and noted == []
    assert acknowledgement(batch, policy=None, rng=random.Random(1)).front == []


def test_a_give_back_reaches_the_master_in_one_write_that_settles_it_with_front() -> None:
    """The slot dies right after giving back, before its acknowledgement: what the master read
    (the pipe, the page) sends the jobs given back to the head of the queue, charges nobody
    and leaves the jobs that ran DONE."""
    read_fd, write_fd = os.pipe()
    page = DoneMap()
    try:
        reporter = LeaseReporter(write_fd, slot_id=1, pid=os.getpid(), done_map=page)
        batch = [SlotJob("q", i, 0, b"x", None, f"k{i}", 1) for i in range(1, 6)]
        reporter.hold(batch, lock_s=60.0, in_order=True)
        os.read(read_fd, 65536)  # the hold note
        page.running[0] = 2  # handle_job's loop ran job 2 (it returned) when the map came
        ran: list[int] = []
        for job in GivingBack(batch, batch=batch, moving=lambda: 2 in ran, noted=reporter.given_back):
            page.running[0] = job.id
            ran.append(job.id)
        written = os.read(read_fd, 65536)
        running = int(page.running[0])
    finally:
        os.close(read_fd)
        os.close(write_fd)
        page.close()
    assert written == b"B 3\nB 4\nB 5\n"
    assert running == HANDLED  # the jobs that ran all returned: a death now blames none
    lease = Lease(jobs=tuple((job.id, 1) for job in batch), lock_s=60.0, renewed_at=0.0,
                  keys=tuple(f"k{job.id}" for job in batch), in_order=True)
    result = settle(lease, written.rstrip(b"\n").split(b"\n"), reason="slot 1 exit 7", blame=True,
                    ordered=True, running=running, policy=None, reply_to=None, rng=random.Random(1))
    assert result.requests == (Done((1, 2)), Later((3, 4, 5), front=True))
    assert (result.charged, result.given_back, result.honoured) == (0, 0, 5)
