"""The lease's arithmetic (queue_server/server/authority.py), apart from any server."""
from __future__ import annotations

from queue_server.server.authority import Term


def test_a_grant_with_no_echo_grants_nothing_even_on_a_clock_younger_than_the_lease() -> None:
    # A server booted 0.3 s ago: read as a time, echo 0 + 5000 ms would lease it 4.7 s more.
    term = Term()
    assert term.grant(1, 5000, 0, now=0.3) == b"200 OK 300\r\n"
    assert term.managed and term.epoch == 1
    assert not term.acknowledging(0.3)
    assert term.lease_word(0.3) == b"lapsed"


def test_a_grant_runs_from_the_echoed_clock_and_never_shortens_one_given() -> None:
    term = Term()
    term.grant(1, 0, 0, now=100.0)
    assert term.grant(1, 1250, 100_000, now=100.9) == b"200 OK 100900\r\n"
    assert term.acknowledging(101.2) and not term.acknowledging(101.25)
    term.grant(1, 1250, 99_000, now=101.0)  # a late grant carrying an older echo
    assert term.lease_until == 101.25


def test_a_newer_epoch_ends_the_older_lease_and_an_older_one_is_refused() -> None:
    term = Term()
    term.grant(1, 0, 0, now=10.0)
    term.grant(1, 5000, 10_000, now=10.0)
    assert term.grant(2, 1000, 0, now=10.5) == b"200 OK 10500\r\n"
    assert not term.acknowledging(10.5), "epoch 1's lease is over once epoch 2 begins"
    assert term.grant(1, 5000, 10_500, now=10.6) == b"409 Stale Epoch 2\r\n"
    assert term.grant(2, 1000, 20_000, now=10.6).startswith(b"400 Bad Request")
