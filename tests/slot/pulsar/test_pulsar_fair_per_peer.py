"""The pulsar is fair per peer (issue 25.8): a peer flooding acquires it never reads delays no
other peer's answer, a new client gets its permit at its turn, and the flood holds bounded memory.

Measured on 29606e0: a peer sending ~60,000 acquires a second (reserving, as slots ask) took
every permit as it accrued, and a new client was answered `granted 0` for 3 s running.
"""
from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from slot.pulsar.client import PermitClient
from slot.pulsar.errors import PermitError
from slot.pulsar.limiter import Limiter
from slot.pulsar.protocol import MAX_RESERVE_S
from tests.polling import DEADLINE_S, poll_until
from tests.procs import REPO_ROOT
from tests.slot.pulsar.served import free_endpoint

RATE_PER_S = 10
# A new client's first permit: the flood holds at most one permit reserved ahead (one per
# peer), so the newcomer's turn is at most two permits away (0.2 s at 10/s), and an answer
# under the flood takes milliseconds (measured: 2.6 ms median, 45 ms worst). The rest of the
# second is for a busy 2-core machine. On 29606e0: no permit within 3 s.
FIRST_PERMIT_BOUND_S = 1.0
# Two peers share the rate: the honest one's turn comes every other permit.
FAIR_SHARE_PER_S = RATE_PER_S / 2
PERMITS_IN_A_ROW = 6
# Any request of another peer (here a state request) is answered within this under the flood:
# ZeroMQ's ROUTER reads its peers in turn (fair-queued), each peer's intake bounded.
ANSWER_BOUND_S = 0.5
WINDOW_S = 3.0
# The pulsar's memory over 3 s of unread flood (measured: +0.1 MB; before, the line's heap
# kept an entry per re-ask, +13 MB over 12 s).
RSS_GROWTH_BOUND = 4 * 1024 * 1024
FLOOD_REPORTS_AFTER_S = 1.0

FLOOD_SCRIPT = """
import sys, time, zmq
from slot.pulsar.protocol import AcquireRequest, MAX_RESERVE_S
socket = zmq.Context().socket(zmq.DEALER)
socket.setsockopt(zmq.LINGER, 0)
socket.connect(sys.argv[1])
# The most a peer may ask for, and never a reply read.
frame = AcquireRequest(id=1, limiter="api", retry=True, reserve_s=MAX_RESERVE_S).encode()
started, sent, reported = time.monotonic(), 0, False
while True:
    socket.send(frame)
    sent += 1
    if not reported and time.monotonic() - started >= float(sys.argv[2]):
        print(sent, flush=True)
        reported = True
"""


@dataclass(frozen=True)
class Flooded:
    endpoint: str
    pulsar: subprocess.Popen[str]
    flood: subprocess.Popen[str]
    sent_in_first_second: int


def _spawn(started: list[subprocess.Popen[str]], args: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, *args], cwd=REPO_ROOT, text=True, start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    started.append(proc)
    return proc


def _answers(client: PermitClient) -> bool:
    with contextlib.suppress(PermitError):
        return "api" in client.states()
    return False


@pytest.fixture(scope="module")
def flooded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flooded]:
    """A real pulsar (10/s on `api`) and a real peer flooding it, going on through the module."""
    config: Path = tmp_path_factory.mktemp("pulsar") / "cluster.toml"
    config.write_text(f"[queues.api]\nrate_limit = {{ permits = {RATE_PER_S}, period_s = 1.0, margin = 0 }}\n")
    endpoint = free_endpoint()
    started: list[subprocess.Popen[str]] = []
    try:
        pulsar = _spawn(started, ["-m", "slot.pulsar.cli", "--config", str(config), "--listen", endpoint])
        with PermitClient(endpoint, reply_timeout_s=0.5) as ready:
            poll_until(lambda: _answers(ready), what="the pulsar answering")
        flood = _spawn(started, ["-c", FLOOD_SCRIPT, endpoint, str(FLOOD_REPORTS_AFTER_S)])
        assert flood.stdout is not None
        readable, _, _ = select.select([flood.stdout], [], [], DEADLINE_S)
        assert readable, "the flooding peer never reported"
        sent = int(flood.stdout.readline())
        yield Flooded(endpoint, pulsar, flood, sent)
    finally:
        for proc in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(DEADLINE_S)


def test_a_new_client_gets_its_permits_at_its_turns_while_a_peer_floods(flooded: Flooded) -> None:
    # A flood: thousands of unread acquires a second (one process on a busy machine).
    assert flooded.sent_in_first_second > 1_000
    with PermitClient(flooded.endpoint) as honest:
        asked_at = time.monotonic()
        first = honest.take("api", 1, wait_s=FIRST_PERMIT_BOUND_S)
        first_s = time.monotonic() - asked_at
        assert first.granted == 1, f"no permit within {FIRST_PERMIT_BOUND_S} s of asking: {first}"
        # Then its fair share: every other permit, one peer against the other.
        started = time.monotonic()
        for i in range(PERMITS_IN_A_ROW):
            taken = honest.take("api", 1, wait_s=FIRST_PERMIT_BOUND_S)
            assert taken.granted == 1, f"permit {i + 2} not within {FIRST_PERMIT_BOUND_S} s: {taken}"
        took_s = time.monotonic() - started
    assert took_s <= PERMITS_IN_A_ROW / FAIR_SHARE_PER_S + FIRST_PERMIT_BOUND_S, (first_s, took_s)
    assert flooded.flood.poll() is None, "the flood stopped: the test measured nothing"


def test_other_peers_are_answered_and_the_flood_holds_bounded_memory(flooded: Flooded) -> None:
    pulsar = psutil.Process(flooded.pulsar.pid)
    rss_before = pulsar.memory_info().rss
    slowest_s = 0.0
    with PermitClient(flooded.endpoint, reply_timeout_s=ANSWER_BOUND_S) as other:
        end = time.monotonic() + WINDOW_S
        while time.monotonic() < end:  # the window measured, not a wait for a condition
            asked_at = time.monotonic()
            view = other.states()["api"]  # PermitError when not answered within the bound
            slowest_s = max(slowest_s, time.monotonic() - asked_at)
            # The flood holds one place in the line, its reserved permit included.
            assert view.waiting <= 1, view
    growth = pulsar.memory_info().rss - rss_before
    assert slowest_s <= ANSWER_BOUND_S
    assert growth <= RSS_GROWTH_BOUND, f"the pulsar grew {growth / 1e6:.1f} MB under {WINDOW_S} s of flood"
    assert flooded.flood.poll() is None, "the flood stopped: the test measured nothing"


def test_a_peer_asking_without_pause_takes_every_other_permit_not_all() -> None:
    """Pure: the flood asks every millisecond, an honest client comes when told; 10 s at 10/s."""
    limiter = Limiter(RATE_PER_S, 1.0)
    granted = {b"flood": 0, b"honest": 0}
    honest_at = 1.0
    for tick in range(10_000):
        now = tick / 1000
        granted[b"flood"] += limiter.try_acquire(now, reserve_s=MAX_RESERVE_S, retry=True,
                                                 client=b"flood").granted
        if now >= honest_at:
            grant = limiter.try_acquire(now, reserve_s=0.25, client=b"honest")
            granted[b"honest"] += grant.granted
            honest_at = now + (grant.start_after_s if grant.granted else grant.retry_after_s)
    # 9 s of sharing at 10/s: about 45 each (29606e0: the honest client got 0).
    assert granted[b"honest"] >= 0.8 * 9 * FAIR_SHARE_PER_S, granted
    assert granted[b"flood"] + granted[b"honest"] <= 10 * RATE_PER_S + 2, granted
    # A place per client, and heap entries a bounded multiple of the places.
    assert len(limiter.line) <= 2
    assert limiter.line.held_entries() <= 4 * len(limiter.line) + 64 + len(limiter.line), limiter.line.held_entries()


def test_a_late_client_costs_the_others_no_rate() -> None:
    """Pure: four clients, a tenth of their requests 0.3 s late (a busy machine). Holding the
    permit for a late client until it came lost rate (8.97/s of 10); it goes to whoever is there."""
    rng = random.Random(1)
    limiter = Limiter(RATE_PER_S, 1.0)
    wake = dict.fromkeys(range(4), 0.0)
    granted, seconds = 0, 60.0
    while (now := min(wake.values())) < seconds:
        client = min(wake, key=wake.__getitem__)
        grant = limiter.try_acquire(now, reserve_s=0.25, client=client)
        late_s = rng.uniform(0, 0.005) + (0.3 if rng.random() < 0.1 else 0.0)
        granted += grant.granted
        used_at = now + grant.start_after_s + 0.01 if grant.granted else now + grant.retry_after_s
        wake[client] = used_at + late_s
    assert granted / seconds >= 0.97 * RATE_PER_S, granted / seconds
