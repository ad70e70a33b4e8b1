"""Lease notes from a slot to its master: the pipe, the note format, and what the master reads."""
from __future__ import annotations

import os

from master.leases import LeasePipes
from master.lifecycle import Leased, LoopStarted, Resolved
from slot.beacon import LeaseNote
from slot.done_map import NOT_STARTED
from slot.handler import SlotJob
from slot.leases import LeaseReporter


def slot_jobs(*ids: int) -> list[SlotJob]:
    return [SlotJob("q", job_id, 0, b"", None, f"k{job_id}", job_id % 3 or None) for job_id in ids]


def test_the_hand_built_note_is_the_models_json() -> None:
    jobs = [(5, 1), (6, None), (7, 25)]
    fast = LeaseNote.encode_held(3, 4242, 60.0, jobs)
    model = LeaseNote(slot_id=3, pid=4242, lock_s=60.0, jobs=jobs)
    assert fast == model.encode()
    assert LeaseNote.decode(fast) == model


def test_the_master_reads_what_a_slot_wrote_even_after_the_slot_is_gone() -> None:
    pipes = LeasePipes()
    try:
        write_fd = pipes.open(1)
        reporter = LeaseReporter(write_fd, slot_id=1, pid=4242)
        reporter.started()
        jobs = slot_jobs(10, 11)
        reporter.hold(jobs, lock_s=2.5)
        jobs[0].done()
        reporter.resolved(jobs[0])
        reporter.release()
        reporter.hold(slot_jobs(12), lock_s=2.5)
        os.close(write_fd)  # the slot died right after writing
        notes = list(pipes.read())
        assert [(n.slot_id, n.pid) for n in notes] == [(1, None), (1, 4242), (1, None)] + [(1, 4242)] * 2
        assert [n.event for n in notes] == [
            LoopStarted(), Leased(((10, 1), (11, 2)), 2.5, ("k10", "k11")), Resolved(b"D 10"),
            Leased((), 0.0), Leased(((12, None),), 2.5, ("k12",)),
        ]
        assert list(pipes.read()) == []
    finally:
        pipes.close_all()


def test_a_half_written_note_waits_for_its_end_and_a_bad_one_is_dropped() -> None:
    pipes = LeasePipes()
    try:
        write_fd = pipes.open(2)
        line = LeaseNote.encode_held(2, 77, 1.0, [(3, 1)]) + b"\n"
        os.write(write_fd, b"{not json\n" + line[:10])
        assert list(pipes.read_slot(2)) == []
        os.write(write_fd, line[10:])
        assert [n.event for n in pipes.read_slot(2)] == [Leased(((3, 1),), 1.0)]
        os.close(write_fd)
    finally:
        pipes.close_all()


def test_a_slot_forked_later_closes_every_read_end_but_keeps_its_write_end() -> None:
    pipes = LeasePipes()
    try:
        first = pipes.open(1)
        second = pipes.open(2)
        inherited = pipes.inherited_fds()
        assert len(inherited) == 2 and first not in inherited and second not in inherited
        os.close(first)
        os.close(second)
    finally:
        pipes.close_all()


def test_a_done_goes_to_the_shared_page_not_the_pipe_and_survives_the_slot() -> None:
    pipes = LeasePipes()
    try:
        write_fd = pipes.open(1)
        done_map = pipes.done_map(1)
        assert done_map is not None
        pid = os.fork()
        if pid == 0:  # the slot: marks jobs 11 and 13 DONE, fails 12, then dies at once
            reporter = LeaseReporter(write_fd, slot_id=1, pid=os.getpid(), done_map=done_map)
            jobs = slot_jobs(10, 11, 12, 13)
            reporter.hold(jobs, lock_s=2.5)
            for job in (jobs[1], jobs[3]):
                job.done()
                reporter.resolved(job)
            jobs[2].fail("bad")
            reporter.resolved(jobs[2])
            os._exit(7)
        os.waitpid(pid, 0)
        os.close(write_fd)
        events = [n.event for n in pipes.read()]
        assert [type(e).__name__ for e in events] == ["Leased", "Resolved"]  # only the FAIL on the pipe
        assert pipes.batch_page(1, 4) == (NOT_STARTED, [1, 3])
    finally:
        pipes.close_all()


def test_the_hand_built_note_with_keys_is_the_models_json() -> None:
    jobs = [(5, 1), (6, None)]
    for keys in (["_5", "my.key:1-x"], ["_5", None], []):
        fast = LeaseNote.encode_held(3, 4242, 60.0, jobs, keys, True)
        model = LeaseNote(slot_id=3, pid=4242, lock_s=60.0, jobs=jobs, keys=keys, in_order=True)
        assert fast == model.encode()
