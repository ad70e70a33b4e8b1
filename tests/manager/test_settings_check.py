"""What the sentinel says when the queue servers' min_sync_replicas (ROLE's <min-sync>)
disagree with each other or with the manager's config (manager/failover/settings_check.py),
and how ROLE's last word is read (manager/failover/role_view.py). Pure logic; the real
processes are in tests/queue_server/server/test_sentinel_min_sync.py."""
from __future__ import annotations

from manager.failover.role_view import View
from manager.failover.settings_check import mismatch


def test_servers_agreeing_with_the_config_say_nothing() -> None:
    assert mismatch({"a:1": 2, "b:1": 2}, configured=2) == ""
    assert mismatch({"a:1": 0, "b:1": 0}, configured=0) == ""
    assert mismatch({}, configured=1) == ""


def test_servers_against_the_config_name_both_values() -> None:
    said = mismatch({"a:1": 1, "b:1": 1, "c:1": 1}, configured=2)
    assert "the queue servers enforce 1, the manager's config says 2" in said
    assert "the queue servers enforce async, the manager's config says 1" in mismatch(
        {"a:1": 0}, configured=1)


def test_servers_that_differ_are_listed_each_with_its_value() -> None:
    said = mismatch({"b:1": 2, "a:1": 1}, configured=1)
    assert "the queue servers differ (a:1 1, b:1 2)" in said


def test_a_server_that_does_not_report_is_named_with_the_value_standing_in() -> None:
    said = mismatch({"a:1": None, "b:1": 1}, configured=1)
    assert "a:1 do(es) not report it" in said and "config value 1 stands in" in said


def test_role_with_and_without_the_min_sync_word() -> None:
    old = View.parse(b"200 OK primary sync 1 0 3 held b:1 7")
    new = View.parse(b"200 OK primary sync 1 0 3 held b:1 7 2")
    later = View.parse(b"200 OK replica async 0 0 3 held - 7 0 something-new")
    assert old is not None and old.min_sync is None
    assert new is not None and new.min_sync == 2 and new.position == 7
    assert later is not None and later.min_sync == 0
    garbled = View.parse(b"200 OK primary sync 1 0 3 held b:1 7 99999999999")
    assert garbled is not None and garbled.min_sync is None  # not believed: as not said


def test_a_server_not_started_for_managed_failover_is_named() -> None:
    said = mismatch({"a:1": 1, "b:1": 1}, configured=1, unmanaged={"b:1"})
    assert said.startswith("b:1 not started for managed failover") and "a second primary" in said
    both = mismatch({"a:1": 1, "b:1": 2}, configured=1, unmanaged={"b:1"})
    assert "the queue servers differ" in both and "; b:1 not started for managed failover" in both
