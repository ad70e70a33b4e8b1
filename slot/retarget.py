"""A retarget that comes during a batch: the inbox of assignments from the master's link, and
the batch as handle_job's loop sees it, which gives back the jobs not started yet.

Why give back instead of finishing the batch: a slot moved to a busier queue used to start
there only after its whole batch (a batch of 10 jobs of 20 ms: 179-480 ms from the map to
the first job in bench/planner_burst.py, issue 19 asks 200 ms). Now the job that runs is
finished, never interrupted, and the jobs after it go back with one `LATER <ids> FRONT`,
which takes their hand-out back (no attempt charged, docs/PROTOCOL.md Part B) and puts them
at the head of their priority in their order: in a backlog they keep their place in line
(a plain LATER put them behind every job put since). Only the default handle() (one
handle_job per job, in order) gives back; a handle() of its own may treat its batch as one
unit (one call for all of it, several passes over it), so it finishes its batch as before.
The check costs about 0.2 us a job (a no-op handle_job: 89 -> 311 ns, 2026-11-26, loaded
2-core box), next to a batch's round trips to the queue server (GETB, DONE).

Crash-safe like any outcome: the jobs given back are noted to the master (one write, `B`
lines, slot/outcome_notes.py) before handle() returns, so a slot that dies before its
acknowledgement has them sent back with the same FRONT by its master (master/settle.py).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import overload

from slot.beacon import Assignment
from slot.handler import SlotJob


class AssignmentInbox:
    """Assignments from the link thread to the loop. `moving` is True while the newest one
    waiting names another queue than the loop's: the batch's job loop checks it between jobs."""

    def __init__(self, queue: str) -> None:
        self._lock = threading.Lock()
        self._waiting: list[Assignment] = []
        # The queue of the last assignment the loop took (the one it works on).
        self._queue = queue
        self.moving = False

    def put(self, assignment: Assignment) -> None:
        """From the link thread. Under the lock with take(): a retarget taken by the loop
        never leaves `moving` set for the new queue's first batch, and a retarget put just
        after a take is never missed."""
        with self._lock:
            self._waiting.append(assignment)
            # The newest decides: a slot sent to b and straight back to a has nowhere to go.
            self.moving = assignment.queue != self._queue

    def take(self) -> list[Assignment]:
        """From the loop: every assignment waiting, oldest first."""
        with self._lock:
            taken, self._waiting = self._waiting, []
            if taken:
                self._queue = taken[-1].queue
            self.moving = False
            return taken


# Told of the jobs given back, in their order, before handle() returns (LeaseNotes.given_back).
NoteGivenBack = Callable[[Sequence[SlotJob]], None]


class GivingBack(Sequence[SlotJob]):
    """A batch whose iteration stops before the next job once `moving()` is true; the jobs of
    `batch` not reached and not resolved (by a before_batch hook) are then given back
    (Outcome.GIVEN_BACK: LATER ... FRONT in the acknowledgement). Wraps what the hooks
    returned (a PacedJobs takes no permit for a job given back); indexing is passed through
    (an index is no loop to stop)."""

    def __init__(self, jobs: Sequence[SlotJob], *, batch: Sequence[SlotJob],
                 moving: Callable[[], bool], noted: NoteGivenBack | None = None) -> None:
        self._jobs = jobs
        self._batch = batch
        self._moving = moving
        self._noted = noted
        self.given_back = 0

    def __len__(self) -> int:
        return len(self._jobs)

    @overload
    def __getitem__(self, index: int) -> SlotJob: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[SlotJob]: ...

    def __getitem__(self, index: int | slice) -> SlotJob | Sequence[SlotJob]:
        return self._jobs[index]

    def __iter__(self) -> Iterator[SlotJob]:
        reached: set[int] = set()
        inner = iter(self._jobs)
        moving = self._moving
        while not moving():
            job = next(inner, None)
            if job is None:
                return
            reached.add(job.id)
            yield job
        self.given_back = give_back([job for job in self._batch if job.id not in reached],
                                    noted=self._noted)


def give_back(jobs: Sequence[SlotJob], *, noted: NoteGivenBack | None = None) -> int:
    """Give back the unresolved jobs, in their order (no attempt charged, back at the head of
    their queue when the batch is acknowledged), and note them all at once; how many."""
    unresolved = [job for job in jobs if not job.resolved]
    for job in unresolved:
        job._give_back()
    if noted is not None and unresolved:
        noted(unresolved)
    return len(unresolved)
