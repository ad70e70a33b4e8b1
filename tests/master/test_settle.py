"""Settling a dead slot's batch (pure): decided outcomes stand, one job is charged only when the
death names it, the others go back uncharged and alone."""
from __future__ import annotations

import random
import re

from master.lifecycle import Lease
from master.settle import Done, Fail, Later, Replies, ReplyTo, settle
from queue_server.protocol.retry import RetryPolicy
from slot.done_map import HANDLED, NOT_STARTED
from slot.handler import SlotJob, set_outcome_hook
from slot.outcome_notes import (
    MAX_NOTED_ERROR_CHARS,
    MAX_NOTED_REPLY_BYTES,
    NoteKind,
    done_note,
    fail_note,
    given_back_notes,
    later_note,
    parse,
    reply_note,
)
from slot.reply_key import Reply, reply_key

LEASE = Lease(jobs=((1, 1), (2, 1), (3, 2), (4, 1)), lock_s=60.0, renewed_at=0.0, keys=("a", "b", "c", "d"))


def settled(notes: list[bytes], *, blame: bool = True, lease: Lease = LEASE, policy: RetryPolicy | None = None):  # type: ignore[no-untyped-def]
    return settle(lease, [n.rstrip(b"\n") for n in notes], reason="slot 1 (pid 9) exit 7", blame=blame,
                  policy=policy, reply_to=ReplyTo("q_reply", 600.0), rng=random.Random(1))


def test_outcome_notes_read_back_as_written() -> None:
    assert parse(done_note(7)[:-1]).kind is NoteKind.DONE
    assert parse(later_note(7, 2.5)[:-1]).delay_s == 2.5
    assert parse(later_note(7, None)[:-1]).delay_s is None
    assert [parse(line).kind for line in given_back_notes([7, 8]).split(b"\n")[:-1]] == [NoteKind.GIVEN_BACK] * 2
    failed = parse(fail_note(7, "bad\nline \"quoted\"", dead=True)[:-1])
    assert (failed.error, failed.dead) == ("bad\nline \"quoted\"", True)
    replied = parse(reply_note(7, "item with space", b"\x00answer \n")[:-1])  # type: ignore[index]
    assert (replied.item, replied.reply) == ("item with space", b"\x00answer \n")
    assert reply_note(7, "i", b"x" * (MAX_NOTED_REPLY_BYTES + 1)) is None
    long = parse(fail_note(7, "x" * 100_000, dead=False)[:-1]).error
    assert long is not None and len(long) < MAX_NOTED_ERROR_CHARS + 100


def test_decided_outcomes_are_honoured_and_the_undecided_go_back_uncharged_and_alone() -> None:
    result = settled([done_note(1), reply_note(2, "it", b"ok") or b"", later_note(3, 5.0)])
    assert result.requests == (Replies("q_reply", 600.0, (Reply(2, "it", b"ok"),)), Done((1, 2)),
                               Later((3,), 5.0), Fail((
                                   # the only undecided job: the death names it
                                   result.requests[-1].failures[0],  # type: ignore[union-attr]
                               )))
    [charged] = result.requests[-1].failures  # type: ignore[union-attr]
    assert (charged.id, charged.solo, charged.error) == (4, True, "slot 1 (pid 9) exit 7")
    assert (result.blamed_key, result.honoured, result.given_back, result.charged) == ("d", 3, 0, 1)


def test_several_undecided_jobs_are_given_back_solo_and_nobody_is_charged() -> None:
    result = settled([fail_note(1, "bad", dead=False)])
    assert result.requests[0] == Later((2, 3, 4), solo=True)
    [failed] = result.requests[1].failures  # type: ignore[union-attr]
    assert (failed.id, failed.error, failed.solo) == (1, "bad", False)
    assert (result.blamed_key, result.given_back, result.charged) == (None, 3, 0)


def test_a_job_running_alone_is_charged_with_its_own_policy() -> None:
    lease = Lease(jobs=((9, 3),), lock_s=60.0, renewed_at=0.0, keys=("k9",))
    result = settled([], lease=lease, policy=RetryPolicy(max_attempts=3, retry_base_s=1, retry_max_s=2))
    [dead] = result.requests[0].failures  # type: ignore[union-attr]
    assert dead.dead and result.blamed_key == "k9"


def test_a_kill_for_a_missed_stop_deadline_gives_everything_back_uncharged() -> None:
    lease = Lease(jobs=((9, 1),), lock_s=60.0, renewed_at=0.0)
    result = settled([], lease=lease, blame=False)
    assert result.requests == (Later((9,), solo=False),) and result.charged == 0


def test_notes_of_other_jobs_and_bad_lines_are_ignored() -> None:
    result = settled([done_note(99), b"Z nonsense\n", done_note(1), fail_note(1, "second", dead=False)])
    assert result.requests[0] == Done((1,))
    assert len(result.bad_notes) == 1


def test_a_job_told_to_the_master_as_it_resolves() -> None:
    told: list[int] = []
    set_outcome_hook(lambda j: told.append(j.id))
    try:
        SlotJob("q", 5, 0, b"", None, "k5", 1).done()
    finally:
        set_outcome_hook(None)
    SlotJob("q", 6, 0, b"", None, "k6", 1).done()
    assert told == [5]


def test_a_batch_run_in_order_names_the_first_undecided_job_and_the_rest_keep_their_place() -> None:
    lease = Lease(jobs=LEASE.jobs, lock_s=60.0, renewed_at=0.0, keys=LEASE.keys, in_order=True)
    # handle_job returned for jobs 1 and 2 (job 2 failed itself), job 3 was running.
    result = settle(lease, [fail_note(2, "bad", dead=False)[:-1]], reason="slot 1 (pid 9) exit 7",
                    blame=True, ordered=True, running=3, policy=None, reply_to=None, rng=random.Random(1))
    # Job 4 never started: back at the head of the queue (LATER ... FRONT), not alone.
    assert result.requests[:2] == (Done((1,)), Later((4,), solo=False, front=True))
    failed, charged = result.requests[2].failures  # type: ignore[union-attr]
    assert (failed.id, failed.error, charged.id, charged.solo) == (2, "bad", 3, True)
    assert (result.blamed_key, result.honoured, result.given_back, result.charged) == ("c", 2, 1, 1)


def test_a_death_after_handle_returned_leaves_every_undecided_job_done() -> None:
    result = settle(LEASE, [later_note(2, None)[:-1]], reason="slot 1 (pid 9) killed by SIGKILL",
                    blame=True, running=HANDLED, policy=None, reply_to=None, rng=random.Random(1))
    assert result.requests == (Done((1, 3, 4)), Later((2,), None))
    assert (result.charged, result.given_back) == (0, 0)


def test_jobs_marked_done_in_the_shared_page_are_done() -> None:
    result = settle(LEASE, [], reason="slot 1 (pid 9) exit 7", blame=True, ordered=True, done_positions=[0, 1],
                    running=NOT_STARTED, policy=None, reply_to=None, rng=random.Random(1))
    # Two undecided and no job running by the page: neither is named, both go back alone.
    assert result.requests == (Done((1, 2)), Later((3, 4), solo=True))
    assert (result.blamed_key, result.honoured) == (None, 2)


def test_jobs_a_retarget_gave_back_go_to_the_front_in_the_lease_order_with_those_never_started() -> None:
    lease = Lease(jobs=LEASE.jobs, lock_s=60.0, renewed_at=0.0, keys=LEASE.keys, in_order=True)
    # Job 4 then job 3 noted given back (the order of the notes is not the lease's), and the
    # slot died before it marked the page HANDLED: job 2, the last one run, is named.
    notes = given_back_notes([4, 3]).split(b"\n")[:-1]
    result = settle(lease, notes, reason="slot 1 (pid 9) exit 7", blame=True, ordered=True, running=2,
                    policy=None, reply_to=None, rng=random.Random(1))
    assert result.requests[:2] == (Done((1,)), Later((3, 4), front=True))
    assert (result.blamed_key, result.honoured, result.given_back, result.charged) == ("b", 3, 0, 1)


def test_a_replies_request_keeps_the_job_data_out_of_its_repr() -> None:
    """The lease keeper logs a refused request by its repr: job data stays out of the logs."""
    shown = repr(Replies("out", None, (Reply(7, "caller-item", b"private answer bytes"),)))
    assert "private answer bytes" not in shown and "'out'" in shown


def test_a_noted_reply_is_sent_again_under_the_key_the_slot_derives() -> None:
    """The slot's PUT and the master's resend name one key (slot/reply_key.py): the lease id
    and item of the note, the handler's output queue. A note of the previous release (the
    same line) settles the same way; a lease without attempts (a server older than keys)
    sends its replies without a key, as the slot did."""
    [replies, *_] = settled([reply_note(2, "it", b"ok") or b""]).requests
    assert isinstance(replies, Replies) and replies.keyed
    [reply] = replies.replies
    assert reply_key(replies.queue, reply.job_id, reply.item) == reply_key("q_reply", 2, "it")
    unkeyed = Lease(jobs=((1, None), (2, None)), lock_s=60.0, renewed_at=0.0)
    [replies, *_] = settled([reply_note(2, "it", b"ok") or b""], lease=unkeyed).requests
    assert isinstance(replies, Replies) and not replies.keyed


def test_a_reply_key_names_one_hand_out_and_fits_the_key_syntax() -> None:
    key = reply_key("q_reply", 123456789012345678, "_7")
    assert re.fullmatch(r"reply\.[0-9a-f]{32}", key)
    assert key == reply_key("q_reply", 123456789012345678, "_7")
    others = {reply_key("q_reply", 123456789012345679, "_7"), reply_key("q_reply", 123456789012345678, "_8"),
              reply_key("other_reply", 123456789012345678, "_7"), reply_key("q_reply", 1, "23456789012345678_7")}
    assert key not in others and len(others) == 4
