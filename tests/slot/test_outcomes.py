"""slot/outcomes.py: a handled batch sorted into its acknowledgement, and retry verdicts."""
from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from queue_server.protocol.retry import RetryPolicy
from slot.handler import Handler, SlotJob
from slot.outcomes import acknowledgement, fail_unresolved, failure, handler_policy

POLICY = RetryPolicy(max_attempts=4, retry_base_s=1.0, retry_max_s=3.0)


def resolve(job: SlotJob, how: str) -> None:
    match how:
        case "done":
            job.done()
        case "later":
            job.later(delay=2.0)
        case "fail":
            job.fail("broken")
        case "give_up":
            job.fail("hopeless", dead=True)
        case "reply":
            job.reply(b"answer")


@given(st.lists(st.tuples(st.sampled_from(["none", "done", "later", "fail", "give_up", "reply"]),
                          st.integers(1, 6)), max_size=30),
       st.booleans(), st.booleans())
def test_every_job_is_acknowledged_exactly_once(
    outcomes: list[tuple[str, int]], with_policy: bool, raised: bool
) -> None:
    jobs = [SlotJob("q", n, 0, b"", "_i", f"k{n}", attempt) for n, (_, attempt) in enumerate(outcomes)]
    for job, (how, _) in zip(jobs, outcomes, strict=True):
        resolve(job, how)
    unresolved = {job.id for job, (how, _) in zip(jobs, outcomes, strict=True) if how == "none"}
    if raised:
        assert fail_unresolved(jobs, RuntimeError("handler bug")) == len(unresolved)
    ack = acknowledgement(jobs, policy=POLICY if with_policy else None, rng=random.Random(1))
    later = [job_id for ids in ack.later.values() for job_id in ids]
    failed = [f.id for f in ack.failures]
    assert sorted(ack.done + later + failed) == list(range(len(jobs)))
    assert len(ack.replies) == sum(how == "reply" for how, _ in outcomes)
    for one in ack.failures:
        job = jobs[one.id]
        assert one.solo == (raised and one.id in unresolved and len(unresolved) > 1)
        if job.give_up or (with_policy and (job.attempt or 1) >= POLICY.max_attempts):
            assert one.dead and one.delay_s is None
        elif with_policy:
            assert one.delay_s is not None and 1.0 <= one.delay_s <= 3.0 * 1.25 and not one.dead
        else:
            assert (one.delay_s, one.dead) == (None, False)
    if raised:
        assert all(jobs[i].error is not None and "RuntimeError: handler bug" in str(jobs[i].error)
                   for i in unresolved)
    else:
        assert set(unresolved) <= set(ack.done)


def test_a_handler_overrides_only_what_it_sets() -> None:
    class Plain(Handler):
        pass

    class Impatient(Handler):
        max_attempts = 2

    queue = RetryPolicy(max_attempts=9, retry_base_s=5.0, retry_max_s=50.0)
    assert handler_policy(Plain, queue) is None
    assert handler_policy(Impatient, queue) == RetryPolicy(2, 5.0, 50.0)


def test_a_job_without_an_attempt_count_is_taken_as_on_its_first_run() -> None:
    verdict = failure(1, "x", attempt=None, policy=POLICY, rng=random.Random(1))
    assert verdict.delay_s is not None and 1.0 <= verdict.delay_s <= 1.25
