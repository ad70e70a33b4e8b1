"""The pure rules behind the doors: which connection may speak for a host, which addresses and
tokens the config takes, and the pulsar's bound on a pause (no socket, no process)."""
from __future__ import annotations

import pytest

from config.endpoints import check_host, check_token, parse_zmq_endpoint
from manager.hosts.heartbeat import Peers
from slot.pulsar.limiter import Limiter
from slot.pulsar.protocol import AckReply, FeedbackKind, ReportRequest
from slot.pulsar.service import answer


def test_a_live_host_is_bound_to_its_connection_until_it_is_lost_or_leaves() -> None:
    peers = Peers(interval_s=1.0, liveness=3)
    assert peers.bound_elsewhere("alpha", b"A") is None  # unknown host: anyone may join
    peers.on_report("alpha", routing_id=b"A", master_pid=10, now=0.0)
    assert peers.bound_elsewhere("alpha", b"A") is None
    assert peers.bound_elsewhere("alpha", b"B") == b"A"
    peers.expire(10.0)  # silent past liveness: lost, so a reconnecting master is taken
    assert peers.bound_elsewhere("alpha", b"B") is None
    peers.on_report("alpha", routing_id=b"B", master_pid=10, now=11.0)
    assert peers.bound_elsewhere("alpha", b"A") == b"B"
    peers.on_report("alpha", routing_id=b"B", master_pid=10, now=12.0, leaving=True)
    assert peers.bound_elsewhere("alpha", b"C") is None


@pytest.mark.parametrize("endpoint", [
    "tcp://127.0.0.1:7500", "tcp://*:7500", "tcp://[::1]:7500", "tcp://manager.example.com:7500",
    "ipc:///tmp/slotmap.sock", "inproc://pulsar",
])
def test_endpoints_the_config_takes(endpoint: str) -> None:
    parse_zmq_endpoint(endpoint)


@pytest.mark.parametrize("endpoint", [
    "127.0.0.1:7500", "tcp://127.0.0.1", "tcp://127.0.0.1:0", "tcp://999.1.1.1:7500",
    "tcp://bad_host!:7500", "udp://127.0.0.1:7500", "tcp://:7500",
])
def test_endpoints_the_config_refuses(endpoint: str) -> None:
    with pytest.raises(ValueError):
        parse_zmq_endpoint(endpoint)


def test_hosts_and_tokens() -> None:
    assert check_host("localhost") == "localhost" and check_host("10.0.0.1") == "10.0.0.1"
    for bad in ("", "999.1.1.1", "1.2.3", "a b"):
        with pytest.raises(ValueError):
            check_host(bad)
    assert check_token("Zx-9_~!", what="t") == "Zx-9_~!"
    for bad in ("", "two words", "tab\there", "caf\u00e9", "line\n"):
        with pytest.raises(ValueError):
            check_token(bad, what="t")


def test_a_pause_over_the_bound_is_cut_to_it_and_counted() -> None:
    limiters = {"geo": Limiter(10, 1.0)}
    long = ReportRequest(id=1, limiter="geo", outcome=FeedbackKind.PAUSE, pause_s=3601.0)
    assert isinstance(answer(limiters, long, 0.0, max_pause_s=3600.0), AckReply)
    assert limiters["geo"].state(0.0).paused_for_s == 3600.0
    assert limiters["geo"].state(0.0).capped_pauses == 1
    short = ReportRequest(id=2, limiter="geo", outcome=FeedbackKind.PAUSE, pause_s=3600.0)
    assert isinstance(answer(limiters, short, 0.0, max_pause_s=3600.0), AckReply)
    assert limiters["geo"].state(0.0).paused_for_s == 3600.0
