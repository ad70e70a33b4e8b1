"""One active manager per database; a standby takes over within seconds of its death."""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from polling import DEADLINE_S
from procs import free_port
from test_service_procs import Cluster, poll_until
from test_store import PG_DSN, database_url  # noqa: F401  (the fixture)

from manager.failover.leader import (
    AdvisoryLease,
    DatabaseUnreachable,
    FileLease,
    NoLease,
    lock_key,
    lock_path,
    try_acquire,
)

# The standby polls the lease every 0.5 s: a takeover takes about that. The deadline is
# for a busy shared 2-core machine (5 s failed there); without the lease's release the
# standby would never take over.
TAKEOVER_DEADLINE_S = 20.0


@pytest.fixture
def cluster(tmp_path: Path, database_url: str) -> Iterator[Cluster]:  # noqa: F811
    started = Cluster.create(tmp_path, {"demo_noop": {"max_slots": 2}}, database_url=database_url)
    started.start_queue_server()
    yield started
    started.close()


def test_a_standby_manager_takes_over_within_seconds_of_a_kill_9_of_the_active_one(
    cluster: Cluster,
) -> None:
    active = cluster.start_manager("manager-1")
    poll_until(lambda: "active manager" in active.log_text(), timeout_s=DEADLINE_S,
               what=lambda: f"the first manager active\n{cluster.logs()}")
    standby = cluster.start_manager("manager-2", standby=True)
    poll_until(lambda: "standing by" in standby.log_text(), timeout_s=DEADLINE_S,
               what=lambda: f"the second manager standing by\n{cluster.logs()}")
    assert "active manager" not in standby.log_text()
    active.kill_group()
    killed_at = time.monotonic()
    poll_until(lambda: "active manager" in standby.log_text(), timeout_s=TAKEOVER_DEADLINE_S,
               what=lambda: f"the standby taking over\n{cluster.logs()}")
    assert time.monotonic() - killed_at < TAKEOVER_DEADLINE_S
    poll_until(lambda: any(str(standby.pid) in e.message for e in cluster.events("manager_active")),
               what="the new manager's event")
    assert standby.alive()


def test_the_file_lock_lives_next_to_the_sqlite_file_and_admits_one_holder(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'var' / 'slotmap.db'}"
    assert lock_path(url) == tmp_path / "var" / "slotmap.db.lock"
    first = try_acquire(url)
    assert isinstance(first, FileLease) and first.still_held()
    assert try_acquire(url) is None
    first.release()
    second = try_acquire(url)
    assert second is not None
    second.release()


def test_a_removed_lock_file_counts_as_a_lost_lease(tmp_path: Path) -> None:
    lease = try_acquire(f"sqlite:///{tmp_path / 'slotmap.db'}")
    assert lease is not None
    (tmp_path / "slotmap.db.lock").unlink()
    assert not lease.still_held()
    lease.release()


def test_in_memory_sqlite_needs_no_election() -> None:
    for url in ("sqlite://", "sqlite:///:memory:", "sqlite+pysqlite://",
                "sqlite:///file:x?mode=memory&cache=shared&uri=true", "sqlite:///file::memory:?uri=true"):
        assert isinstance(try_acquire(url), NoLease), url
    with pytest.raises(ValueError, match="no leader election for mysql"):
        try_acquire("mysql://u@h/db")


def test_every_spelling_of_one_sqlite_file_takes_the_same_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 16, break 5: `sqlite+pysqlite:///same/file` was taken for in-memory and skipped
    the election (fails on f5016ee)."""
    (tmp_path / "var").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "var")
    monkeypatch.chdir(tmp_path)
    real = tmp_path.resolve() / "var" / "slotmap.db"
    spellings = [
        f"sqlite:///{tmp_path / 'var' / 'slotmap.db'}",
        f"sqlite+pysqlite:///{tmp_path / 'var' / 'slotmap.db'}",
        "sqlite:///./var/slotmap.db",
        "sqlite+pysqlite:///var/../var/slotmap.db",
        "sqlite:///link/slotmap.db",
        f"sqlite:///{tmp_path / 'link' / 'slotmap.db'}?timeout=5",
        "sqlite:///file:link/slotmap.db?uri=true",
    ]
    assert {lock_path(url) for url in spellings} == {real.with_name("slotmap.db.lock")}
    first = try_acquire(spellings[0])
    assert isinstance(first, FileLease)
    try:
        for url in spellings[1:]:
            assert try_acquire(url) is None, url
    finally:
        first.release()


def test_an_unreachable_database_is_not_a_held_lock(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(DatabaseUnreachable, match="cannot open the lock file"):
        try_acquire(f"sqlite:///{blocker / 'slotmap.db'}")
    with pytest.raises(DatabaseUnreachable):
        try_acquire(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing")


def test_advisory_lock_keys_are_stable_signed_64_bit_numbers() -> None:
    key = lock_key("slotmap.manager:test:public")
    assert key == lock_key("slotmap.manager:test:public")
    assert key != lock_key("slotmap.manager:test:other")
    assert -(2**63) <= key < 2**63


@pytest.mark.skipif(not PG_DSN, reason="PostgreSQL not tested: set SLOTMAP_TEST_PG")
def test_the_postgresql_advisory_lock_admits_one_holder(database_url: str) -> None:  # noqa: F811
    if not database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only")
    first = try_acquire(database_url)
    assert isinstance(first, AdvisoryLease) and first.still_held()
    assert try_acquire(database_url) is None
    first.release()
    second = try_acquire(database_url)
    assert second is not None
    second.release()
