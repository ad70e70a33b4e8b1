"""From the desired slot map to forks, retargets and stops (pure)."""
from __future__ import annotations

from master.reconciler import (
    Reconciler,
    Retarget,
    SlotAssignment,
    Spawn,
    Stop,
    assign,
    changes,
)


def test_an_empty_host_gets_new_slots_with_the_lowest_ids() -> None:
    target = assign({}, {"a": 2, "b": 1}, capacity=10, priorities={})
    assert target == {0: "a", 1: "a", 2: "b"}
    assert changes({}, target) == [Spawn(0, "a"), Spawn(1, "a"), Spawn(2, "b")]


def test_slots_keep_their_queue_when_the_map_does_not_change() -> None:
    current = {0: "a", 3: "b", 5: "a"}
    assert assign(current, {"a": 2, "b": 1}, capacity=10, priorities={}) == current
    assert changes(current, current) == []


def test_surplus_slots_are_retargeted_rather_than_killed_and_forked() -> None:
    current = {0: "a", 1: "a", 2: "a"}
    target = assign(current, {"a": 1, "b": 2}, capacity=10, priorities={})
    assert target == {0: "a", 1: "b", 2: "b"}
    assert changes(current, target) == [Retarget(1, "b"), Retarget(2, "b")]


def test_shrinking_stops_the_highest_surplus_slots() -> None:
    current = {0: "a", 1: "a", 2: "a"}
    target = assign(current, {"a": 1}, capacity=10, priorities={})
    assert changes(current, target) == [Stop(1), Stop(2)]


def test_over_capacity_the_higher_priority_queue_is_served_first() -> None:
    target = assign({}, {"low": 3, "high": 3}, capacity=4, priorities={"high": 5, "low": 1})
    assert sorted(target.values()) == ["high", "high", "high", "low"]


def test_ids_of_slots_still_exiting_are_not_reused() -> None:
    target = assign({0: "a"}, {"a": 3}, capacity=10, priorities={}, held_ids={1})
    assert target == {0: "a", 2: "a", 3: "a"}


def test_reconciler_ignores_queues_without_a_handler_and_names_them() -> None:
    reconciler = Reconciler(handled_queues=frozenset({"a"}))
    reconciler.apply_slot_map({"a": 1, "broken": 2})
    assert reconciler.target({}, capacity=10, held_ids=()) == {0: "a"}
    assert reconciler.unhandled_queues() == ["broken"]


def test_a_manager_assignment_replaces_the_static_map_slot_by_slot() -> None:
    reconciler = Reconciler(handled_queues=frozenset({"a", "b"}))
    reconciler.apply_slot_map({"a": 2})
    current = reconciler.target({}, capacity=10, held_ids=())
    reconciler.apply_slot_map(SlotAssignment({0: "a", 1: "b", 4: "b"}))
    target = reconciler.target(current, capacity=10, held_ids=())
    assert changes(current, target) == [Retarget(1, "b"), Spawn(4, "b")]


def test_a_manager_assignment_is_bounded_by_the_ceiling_and_the_static_map_by_the_capacity() -> None:
    # Capped by load to 1 slot, memory for 5: the manager's map of 3 (one per queue minimum)
    # runs whole; the static map, which no manager planned within the load, keeps to 1.
    reconciler = Reconciler(handled_queues=frozenset({"a", "b", "c"}))
    reconciler.apply_slot_map(SlotAssignment({0: "a", 1: "b", 2: "c"}))
    assert reconciler.target({}, capacity=1, held_ids=(), ceiling=5) == {0: "a", 1: "b", 2: "c"}
    assert reconciler.target({}, capacity=1, held_ids=(), ceiling=2) == {0: "a", 1: "b"}
    reconciler.apply_slot_map({"a": 1, "b": 1, "c": 1})
    assert len(reconciler.target({}, capacity=1, held_ids=(), ceiling=5)) == 1
