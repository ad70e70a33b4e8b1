"""A flooding client holds one place in a limiter's line, places lapse, pauses are capped and an
admin lifts them (issue 16: 1 s of flood told a legitimate client to come back after 733 s)."""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import zmq

from config.models import RateLimitConfig
from deploy.cli import main
from slot.pulsar.client import PermitClient
from slot.pulsar.limiter import Limiter
from slot.pulsar.protocol import AcquireRequest, ReportRequest, pause
from slot.pulsar.service import answer
from slot.pulsar.waiting_line import PLACE_GRACE_S, WaitingLine
from tests.slot.pulsar.served import Served

TEN_PER_S = RateLimitConfig(permits=10, period_s=1.0)
# The flood of the issue: requests in 1 s from one client that never comes back at its turn.
FLOOD_REQUESTS = 10_000


def test_one_client_flooding_requests_holds_one_place_and_does_not_push_others_back() -> None:
    limiter = Limiter(10, 1.0)
    for i in range(FLOOD_REQUESTS):
        limiter.try_acquire(i / FLOOD_REQUESTS, client=b"flood")
    told = limiter.try_acquire(1.0, client=b"honest")
    # Before: 733 s. Now: behind at most the flooder's one place, a turn or two at 10/s.
    assert told.granted == 1 or told.retry_after_s <= 0.3, told
    assert limiter.state(1.0).waiting <= 2


def test_a_retry_flag_without_a_place_does_not_jump_the_line() -> None:
    limiter = Limiter(10, 1.0)
    assert limiter.try_acquire(0.0, client=b"a").granted == 1
    waiting = limiter.try_acquire(0.0, client=b"b")          # b's turn at 0.1
    assert waiting.granted == 0
    # At 0.1 the permit is b's: a client claiming a retry it was never told to make gets none.
    assert limiter.try_acquire(0.1, retry=True, client=b"liar").granted == 0
    assert limiter.try_acquire(0.1, retry=True, client=b"b").granted == 1


def test_asking_again_before_ones_turn_gives_the_same_turn_and_moves_nothing() -> None:
    limiter = Limiter(1, 1.0)
    limiter.try_acquire(0.0, client=b"a")
    first = limiter.try_acquire(0.0, client=b"b")
    again = limiter.try_acquire(0.5, client=b"b")
    assert again.granted == 0
    assert again.retry_after_s == pytest.approx(first.retry_after_s - 0.5)
    assert limiter.line.end == pytest.approx(first.retry_after_s)


def test_a_place_not_claimed_lapses_after_its_grace() -> None:
    limiter = Limiter(10, 1.0)
    limiter.try_acquire(0.0, client=b"a")
    limiter.try_acquire(0.0, client=b"gone")                  # turn at 0.1, never claimed
    assert limiter.state(0.0).waiting == 1
    limiter.try_acquire(0.1 + PLACE_GRACE_S + 0.01, client=b"a")
    state = limiter.state(0.2 + PLACE_GRACE_S)
    assert state.lapsed_places == 1
    assert limiter.line.place_of(b"gone") is None


def test_a_full_line_refuses_new_clients_a_place_and_counts_them() -> None:
    line = WaitingLine(max_places=3)
    assert all(line.join(client, float(turn)) for turn, client in enumerate([b"a", b"b", b"c"]))
    assert not line.join(b"d", 3.0)
    assert line.join(b"a", 4.0)                               # a client moving its own place
    assert (len(line), line.refused_total, line.end) == (3, 1, 4.0)


def test_a_pause_over_max_pause_s_is_cut_to_it_and_counted() -> None:
    limiters = {"api": Limiter(10, 1.0)}
    request = ReportRequest(id=1, limiter="api", outcome=pause(86400).kind, pause_s=86400)
    answer(limiters, request, 0.0, max_pause_s=300.0)
    state = limiters["api"].state(0.0)
    assert state.paused_for_s == pytest.approx(300.0)
    assert state.capped_pauses == 1


def test_resume_lifts_a_pause_at_once() -> None:
    limiter = Limiter(10, 1.0)
    limiter.report(0.0, pause(60))
    assert limiter.try_acquire(1.0).granted == 0
    assert limiter.resume(1.0)
    assert limiter.try_acquire(1.2).granted == 1
    assert not limiter.resume(1.3)


def test_the_service_keys_places_by_the_senders_identity() -> None:
    limiters = {"api": Limiter(10, 1.0)}
    for i in range(1000):
        answer(limiters, AcquireRequest(id=i, limiter="api"), i / 1000, client=b"flood")
    reply = answer(limiters, AcquireRequest(id=1, limiter="api"), 1.0, client=b"honest")
    assert reply.granted == 1 or reply.retry_after_s <= 0.3  # type: ignore[union-attr]


def test_a_real_flood_for_a_second_does_not_hold_back_a_real_client(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served],
) -> None:
    served = serve({"api": TEN_PER_S})
    context = zmq.Context.instance()
    flood = context.socket(zmq.DEALER)
    flood.setsockopt(zmq.LINGER, 0)
    flood.connect(served.endpoint)
    try:
        started = time.monotonic()
        sent = 0
        while time.monotonic() - started < 1.0:
            flood.send(AcquireRequest(id=sent, limiter="api").encode())
            sent += 1
        # The flood's requests are answered before the honest client's (one ROUTER, in order).
        with PermitClient(served.endpoint) as honest:
            taken = honest.take("api", 1, wait_s=5.0)
        assert taken.granted == 1, f"after a flood of {sent} requests: {taken}"
        assert served.service.limiters["api"].state(time.monotonic()).waiting <= 2
    finally:
        flood.close()


def test_an_admin_lifts_a_real_pause_through_the_client(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served],
) -> None:
    served = serve({"api": TEN_PER_S})
    with PermitClient(served.endpoint) as client:
        assert client.report("api", pause(86400))
        view = client.states()["api"]
        assert 0 < view.paused_for_s <= 300.0 and view.capped_pauses == 1
        client.resume("api")
        assert client.states()["api"].paused_for_s == 0
        assert client.take("api", 1, wait_s=2.0).granted == 1


def test_slotmap_limiters_resume_lifts_a_pause(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    served = serve({"api": TEN_PER_S})
    config = tmp_path / "cluster.toml"
    config.write_text(f'[pulsar]\nlisten = "{served.endpoint}"\n')
    config.chmod(0o600)
    with PermitClient(served.endpoint) as client:
        assert client.report("api", pause(60))
        assert main(["limiters", "--config", str(config), "resume", "api"]) == 0
        assert "pause lifted" in capsys.readouterr().out
        assert client.states()["api"].paused_for_s == 0
    assert main(["limiters", "--config", str(config), "resume"]) == 2
    assert "name the limiter" in capsys.readouterr().err
