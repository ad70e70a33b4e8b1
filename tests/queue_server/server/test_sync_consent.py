"""A managed primary's fallback to async (sync_commit.py ASKING, issue 25, 4): it holds its
replies until the manager's consent, and a consent that predates its request is not its
own. Pure logic (the same code the real-process test of tests/queue_server/server/
test_managed_takeover.py drives); the `LEASE ... ALONE` door in the protocol tests."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from queue_server.protocol.commands import parse_line
from queue_server.protocol.errors import ProtocolError
from queue_server.server.sync_commit import SyncCommit, SyncState


@dataclass(eq=False)
class Conn:
    held_turns: int = 0

    def send_held(self, data: bytes) -> None:
        raise AssertionError("released replies are returned, not sent here")


def _asking(now: float = 10.0) -> tuple[SyncCommit, Conn]:
    sync = SyncCommit(min_replicas=1, timeout_s=1.0, fallback="async", consent_needed=True)
    conn = Conn()
    assert sync.hold({"link": 100}, (1, 100), [(conn, b"200 OK\r\n")], now - 1.5) == []
    assert sync.tick(now) == []  # past the timeout: it asks, it does not go alone
    assert sync.state is SyncState.ASKING and sync.describe() == "asking"
    return sync, conn


def test_a_managed_primary_asks_and_holds_until_the_manager_consents() -> None:
    sync, conn = _asking()
    later = Conn()
    assert sync.hold({"link": 200}, (2, 200), [(later, b"200 OK\r\n")], 10.2) == []  # still held
    assert sync.consent(decided_after=10.1) == [(conn, b"200 OK\r\n"), (later, b"200 OK\r\n")]
    assert sync.state is SyncState.ALONE and sync.fallbacks == 1
    assert conn.held_turns == later.held_turns == 0


def test_a_consent_decided_before_the_request_is_ignored() -> None:
    sync, _ = _asking(now=10.0)
    assert sync.consent(decided_after=9.9) == []
    assert sync.state is SyncState.ASKING


def test_a_replica_confirming_while_it_asks_ends_the_request_and_a_late_consent_is_void() -> None:
    sync, conn = _asking()
    assert sync.ack("link", 100) == [(conn, b"200 OK\r\n")]
    assert sync.state is SyncState.SYNC
    assert sync.consent(decided_after=11.0) == []
    assert sync.state is SyncState.SYNC


def test_an_unmanaged_primary_goes_alone_at_once_as_before() -> None:
    sync = SyncCommit(min_replicas=1, timeout_s=1.0, fallback="async")
    conn = Conn()
    sync.hold({"link": 100}, (1, 100), [(conn, b"200 OK\r\n")], 8.0)
    assert sync.tick(10.0) == [(conn, b"200 OK\r\n")]
    assert sync.state is SyncState.ALONE


def test_lease_parses_the_consent_and_refuses_any_other_fourth_word() -> None:
    command = parse_line(b"LEASE 3 1250 77 ALONE").command
    assert command.alone and command.epoch == 3 and command.echo_ms == 77  # type: ignore[union-attr]
    assert not parse_line(b"LEASE 3 1250 77").command.alone  # type: ignore[union-attr]
    for line in (b"LEASE 3 1250 77 alone", b"LEASE 3 1250 77 ALONE ALONE", b"LEASE 3 1250 77 1"):
        with pytest.raises(ProtocolError) as refused:
            parse_line(line)
        assert refused.value.reply.startswith(b"400 Bad Request: LEASE <epoch> <ms> <echo> [ALONE]")


def test_a_deposed_primary_that_was_alone_starts_in_sync_when_promoted_again() -> None:
    sync, _conn = _asking()
    sync.consent(decided_after=10.1)
    assert sync.state is SyncState.ALONE
    sync.drop_all()  # FOLLOW: deposed
    assert sync.state is SyncState.SYNC
    later = Conn()
    assert sync.hold({"link2": 50}, (3, 300), [(later, b"200 OK\r\n")], 20.0) == []  # held again
