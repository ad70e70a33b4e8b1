"""Where the sentinel's record starts (manager/failover/takeover.py, issue 25, 5): above every epoch
the servers report, with the primary of the highest epoch and its own sync state; nobody
named while no primary of that epoch answers. The plan is pure logic; its writes go to a
real database (SQLite; PostgreSQL with SLOTMAP_TEST_PG). The real-process test is
tests/queue_server/server/test_managed_takeover.py."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import pg_schema
from sqlalchemy.engine import Engine

from manager.failover import authority
from manager.failover.authority import Record
from manager.failover.sentinel import View
from manager.failover.takeover import found, plan
from manager.storage.store import Store


def _view(role: str, epoch: int, sync: str = "sync", in_sync: str = "-", position: int = 5) -> View:
    line = f"200 OK {role} {sync} 1 0 {epoch} held {in_sync} {position}".encode()
    view = View.parse(line)
    assert view is not None
    return view


def test_a_record_at_or_above_the_servers_epochs_stands() -> None:
    views = {"a:1": _view("primary", 2), "b:1": _view("replica", 2), "c:1": None}
    assert plan(Record(2, "a:1", True, ()), views) is None
    assert plan(Record(5, "a:1", True, ()), views) is None


def test_a_new_cluster_starts_at_epoch_one_with_the_first_primary() -> None:
    got = plan(None, {"a:1": _view("replica", 0), "b:1": _view("primary", 0)})
    assert got is not None and got.record == Record(1, "b:1", True, ())


def test_a_fresh_database_starts_above_the_running_primarys_epoch() -> None:
    views = {"a:1": None, "b:1": _view("primary", 2, in_sync="c:1"), "c:1": _view("replica", 2),
             "d:1": _view("primary", 0, position=99)}  # restarted, epoch lost: not chosen
    got = plan(None, views)
    assert got is not None and got.record == Record(3, "b:1", True, ("c:1",))
    assert got.why == "no record in this database"
    assert found(views).startswith("a:1 silent; b:1 primary epoch 2 lease held sync sync position 5")


def test_a_restored_record_below_the_servers_is_raised_and_a_lone_primary_is_not_in_sync() -> None:
    got = plan(Record(1, "a:1", True, ("b:1",)), {"a:1": _view("replica", 4),
                                                   "b:1": _view("primary", 4, sync="alone")})
    assert got is not None and got.record == Record(5, "b:1", False, ())
    assert "record's epoch 1 is below" in got.why


def test_no_primary_of_the_highest_epoch_answering_names_nobody() -> None:
    got = plan(None, {"a:1": _view("replica", 3), "b:1": _view("primary", 2)})
    assert got is not None and got.record is None and "no primary of epoch 3" in got.why


def test_an_epoch_past_64_bits_is_not_believed() -> None:
    assert View.parse(b"200 OK primary sync 1 0 9223372036854775808 held - 0") is None
    assert View.parse(b"200 OK primary sync 1 0 " + b"9" * 5000 + b" held - 0") is None


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """The authority's table on a real database (migrated by Store.open)."""
    dsn = os.environ.get("SLOTMAP_TEST_PG")
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{tmp_path / 'slotmap.db'}"
        elif not dsn:
            pytest.skip("PostgreSQL not tested: set SLOTMAP_TEST_PG")
        else:
            url = stack.enter_context(pg_schema(dsn, "slotmap_takeover"))
        store = Store.open(url)
        stack.callback(store.close)
        yield store.engine


def test_take_over_writes_the_first_record_or_raises_one_by_compare_and_set(engine: Engine) -> None:
    first = Record(3, "b:1", True, ("c:1",))
    assert authority.take_over(engine, None, first) == first
    assert authority.take_over(engine, None, Record(9, "x:1", True, ())) is None  # another wrote first
    assert authority.read(engine) == first
    raised = Record(7, "c:1", False, ())
    assert authority.take_over(engine, Record(1, "b:1", True, ()), raised) is None  # not the record seen
    assert authority.take_over(engine, first, raised) == raised
    assert authority.read(engine) == raised


def test_a_promotion_fails_when_the_fallback_was_recorded_after_its_read(engine: Engine) -> None:
    seen = authority.take_over(engine, None, Record(1, "a:1", True, ()))
    assert seen is not None
    assert authority.note_sync(engine, seen, False, (), 2) is not None  # another manager's write
    assert authority.promote(engine, seen, "b:1", 2) is None
    assert authority.read(engine) == Record(1, "a:1", False, (), 2)


def test_the_primarys_min_sync_replicas_is_recorded_and_carried_by_a_promotion(engine: Engine) -> None:
    first = plan(None, {"a:1": View.parse(b"200 OK primary sync 1 0 0 held b:1 5 2")})
    assert first is not None and first.record == Record(1, "a:1", True, ("b:1",), 2)
    seen = authority.take_over(engine, None, first.record)
    assert seen is not None and authority.read(engine) == seen
    assert authority.promote(engine, seen, "b:1", 1) == Record(2, "b:1", True, (), 1)
    assert authority.read(engine) == Record(2, "b:1", True, (), 1)
