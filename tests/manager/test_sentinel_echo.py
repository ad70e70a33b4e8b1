"""The sentinel's echo of a primary's clock after the primary restarts: the server side is
the real lease arithmetic (queue_server/server/authority.py) on a clock the test sets, since
a machine's reboot (its monotonic clock starting again from 0) cannot be made for real."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.failover.sentinel import Sentinel
from manager.storage.store import Store
from queue_server.server.authority import Term

ADDRESS = "127.0.0.1:7711"


class PrimaryOnItsClock:
    """A managed primary's answers to ROLE and LEASE (the sentinel's ServerLink), at `now`
    on its own monotonic clock."""

    def __init__(self, now: float) -> None:
        self.term = Term(managed=True)
        self.now = now
        self.refused: list[bytes] = []

    def ask(self, line: bytes, timeout_s: float = 0.3) -> bytes | None:
        words = line.split()
        if words[0] == b"ROLE":
            lease = self.term.lease_word(self.now).decode()
            return f"200 OK primary async 0 0 {self.term.epoch} {lease} - 0".encode()
        assert words[0] == b"LEASE", line
        reply = self.term.grant(int(words[1]), int(words[2]), int(words[3]), self.now).rstrip(b"\r\n")
        if not reply.startswith(b"200 "):
            self.refused.append(reply)
        return reply

    def close(self) -> None:
        return None


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[Sentinel]:
    store = Store.open(f"sqlite:///{tmp_path / 'slotmap.db'}")
    try:
        yield Sentinel(store.engine, [ADDRESS], token=None, lease_s=1.25, promote_after_s=1.5,
                       sync_mode=False, note=lambda event: None, stopping=lambda: False)
    finally:
        store.close()


def leased_then_rebooted(sentinel: Sentinel, *, up_s: float, back_s: float) -> PrimaryOnItsClock:
    """A turn leases the primary at `up_s` on its clock; another, after its machine
    rebooted, finds it at `back_s` on the new clock (and epoch 0: the term is not kept)."""
    before = PrimaryOnItsClock(up_s)
    sentinel.links[ADDRESS] = before  # type: ignore[assignment]
    sentinel.turn(0.0)
    assert before.term.epoch == 1 and before.term.acknowledging(up_s)
    rebooted = PrimaryOnItsClock(back_s)
    sentinel.links[ADDRESS] = rebooted  # type: ignore[assignment]
    sentinel.turn(0.0)
    return rebooted


def test_a_primary_rebooted_is_leased_at_once_not_once_its_uptime_passes_the_old_one(sentinel: Sentinel) -> None:
    # Its machine was up for a day; after the reboot its clock reads 30 s. An echo from the
    # day-old clock is "not a time of this server": before, every grant was refused that way
    # until the new uptime passed a day, and the lone primary acknowledged nothing meanwhile.
    rebooted = leased_then_rebooted(sentinel, up_s=86_400.0, back_s=30.0)
    assert rebooted.refused == []
    assert rebooted.term.epoch == 1 and rebooted.term.acknowledging(30.0)
    assert rebooted.term.lease_until == 30.0 + 1.25  # from its new clock's echo


def test_a_primary_rebooted_to_a_clock_just_past_its_old_echo_is_leased_from_its_new_echo(sentinel: Sentinel) -> None:
    # Up for 10 s, rebooted, its clock reads 10.5 s: the old echo (10,000 ms) reads as a
    # time of its new boot, and before it leased until 11.25 s there, counted by us from
    # when that echo came back before the reboot, long over.
    rebooted = leased_then_rebooted(sentinel, up_s=10.0, back_s=10.5)
    assert rebooted.term.lease_until == 10.5 + 1.25
    assert sentinel.echo[ADDRESS][0] == 10_500


def test_a_primary_renewed_keeps_its_echo_and_its_lease_without_a_gap(sentinel: Sentinel) -> None:
    # Not a restart (its epoch never went down): its clock is still the one it echoed.
    primary = PrimaryOnItsClock(500.0)
    sentinel.links[ADDRESS] = primary  # type: ignore[assignment]
    sentinel.turn(0.0)
    primary.now = 500.2
    sentinel.turn(0.0)
    assert primary.term.lease_until == 500.0 + 1.25 and sentinel.echo[ADDRESS][0] == 500_200
