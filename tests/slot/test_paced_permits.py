"""Per-job permits: a rate-limited batch goes out at the rate, job by job, and the handler's
`self.limiter` reports to a real pulsar over ZeroMQ."""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence

import pytest

from config.models import RateLimitConfig
from slot.handler import Handler, Outcome, SlotJob, handler
from slot.permits import RateLimitHook, SlotLimiter, limiter_for
from slot.pulsar.client import PermitClient
from slot.pulsar.errors import PermitTimeout
from slot.pulsar.protocol import OK
from tests.slot.pulsar.served import free_endpoint


def jobs(queue: str, count: int) -> list[SlotJob]:
    return [SlotJob(queue, i, 0, b"x", None) for i in range(1, count + 1)]


@handler("paced_probe")
class PacedProbe(Handler):
    def handle(self, jobs: Sequence[SlotJob]) -> None:
        raise AssertionError("not run in these tests")


@handler("own_permits_probe")
class OwnPermitsProbe(Handler):
    permits_per_job = False


def test_a_batch_goes_out_one_permit_per_job_spaced_by_the_rate(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str],
) -> None:
    endpoint = pulsar({"paced_probe": RateLimitConfig(permits=10, period_s=1.0, margin=0)})
    with PermitClient(endpoint) as client:
        paced = RateLimitHook(client, {"paced_probe": "paced_probe"})("paced_probe", jobs("paced_probe", 6))
        assert len(paced) == 6  # no permit taken to count the batch
        reached_at = []
        for _job in paced:
            reached_at.append(time.monotonic())
    gaps = [b - a for a, b in itertools.pairwise(reached_at)]
    # 10/s: one job every 0.1 s, not the whole batch at once after 0.5 s of waiting.
    assert len(gaps) == 5
    assert all(gap >= 0.07 for gap in gaps[1:]), gaps
    assert reached_at[-1] - reached_at[0] >= 0.4


def test_jobs_whose_permit_does_not_come_in_time_are_postponed_and_not_handed_out(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str],
) -> None:
    endpoint = pulsar({"paced_probe": RateLimitConfig(permits=1, period_s=1.0, margin=0)})
    batch = jobs("paced_probe", 4)
    with PermitClient(endpoint) as client:
        paced = RateLimitHook(client, {"paced_probe": "paced_probe"}, max_wait_s=0.2)("paced_probe", batch)
        assert [job.id for job in paced] == [1]
        with pytest.raises(PermitTimeout, match="postponed"):
            paced[2]
    assert batch[0].outcome is Outcome.DONE
    assert [job.outcome for job in batch[1:]] == [Outcome.LATER] * 3
    assert all(0.5 <= (job.delay_s or 0) <= 1.0 for job in batch[1:])


def test_a_handler_that_takes_its_own_permits_gets_its_batch_unpaced() -> None:
    # Nothing listens there: any permit request would wait.
    client = PermitClient(free_endpoint(), reply_timeout_s=0.1)
    batch = jobs("own_permits_probe", 3)
    hook = RateLimitHook(client, {"own_permits_probe": "own_permits_probe"})
    assert hook("own_permits_probe", batch) is batch
    client.close()


def test_the_handlers_limiter_cuts_and_pauses_the_cluster_wide_rate(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str],
) -> None:
    endpoint = pulsar({"paced_probe": RateLimitConfig(permits=10, period_s=1.0, margin=0)})
    with PermitClient(endpoint) as client:
        RateLimitHook(client, {"paced_probe": "paced_probe"})
        limiter = PacedProbe().limiter
        assert limiter is limiter_for("paced_probe")
        assert limiter.name == "paced_probe"
        limiter.acquire()
        limiter.slow_down()
        state = client.states()["paced_probe"]
        assert (state.cuts, state.current_per_s) == (1, 5.0)
        limiter.pause(30)
        assert client.states()["paced_probe"].paused_for_s > 25
        limiter.ok()


def test_feedback_on_a_limiter_the_pulsar_does_not_know_is_logged_not_raised(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    endpoint = pulsar({})
    with PermitClient(endpoint) as client:
        limiter = SlotLimiter("nobody", client)
        assert limiter.report(OK) is False
    assert "limiter nobody" in caplog.text


def test_ok_is_reported_at_most_every_fifth_of_a_second() -> None:
    sent: list[str] = []

    class Recording(PermitClient):
        def report(self, limiter: str, feedback: object) -> bool:
            sent.append(limiter)
            return True

    times = iter([100.0, 100.1, 100.15, 100.3, 100.35])
    limiter = SlotLimiter("geo", Recording(free_endpoint()), clock=lambda: next(times))
    for _ in range(5):
        limiter.ok()
    assert len(sent) == 2


def test_a_handler_that_never_goes_through_its_batch_still_pays_a_permit_per_job(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str],
) -> None:
    endpoint = pulsar({"paced_probe": RateLimitConfig(permits=10, period_s=1.0, margin=0)})
    with PermitClient(endpoint) as client:
        hook = RateLimitHook(client, {"paced_probe": "paced_probe"})
        hook("paced_probe", jobs("paced_probe", 6))  # handled without looking at its jobs
        started = time.monotonic()
        second = hook("paced_probe", jobs("paced_probe", 2))
        # The six permits owed (one at once, five at 10/s) came before the next batch, and
        # this handler's batches now take their permits before it runs.
        assert time.monotonic() - started >= 0.6
        assert isinstance(second, list) and len(second) == 2
        state = client.states()["paced_probe"]
    assert state.granted_total == 8
