"""JOBS positions on the store itself (job_positions.py): the cases a real server reaches only
by chance timing (a level emptied and made anew, LATER FRONT between pages, a finished key
finished again, a position from another store)."""
from __future__ import annotations

from typing import Any

from queue_server.protocol.job_positions import parse_position
from queue_server.server.job_views import jobs_view
from queue_server.server.store import Store

NOW = 1_800_000_000.0


def _page(store: Store, state: str, limit: int, last: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    if last is None:
        return jobs_view(store, "q", state, limit, None)
    return jobs_view(store, "q", state, limit, _key(last["key"]), parse_position(state, last["position"].encode()))


def _key(text: str) -> Any:
    return int(text[1:]) if text.startswith("_") else text


def _keys(rows: list[dict[str, Any]]) -> list[str]:
    return [row["key"] for row in rows]


def _ready(store: Store, *keys: str, priority: int = 0) -> None:
    for key in keys:
        store.put("q", priority, b"x", None, NOW, key=key)


def test_a_level_emptied_and_made_anew_shows_its_new_jobs_from_their_start() -> None:
    store = Store()
    _ready(store, "a", "b", "c", "d")
    first = _page(store, "ready", 2)
    store.take(("q",), 4, NOW, None, None)
    _ready(store, "e", "f")
    assert _keys(_page(store, "ready", 10, first[-1])) == ["e", "f"]


def test_a_job_put_back_at_the_front_between_pages_moves_none_of_those_that_stayed() -> None:
    store = Store()
    _ready(store, "a", "b", "c", "d", "e")
    first = _page(store, "ready", 2)
    jobs = store.take(("q",), 3, NOW, None, None)
    assert store.later([jobs[0].id], NOW, front=True) == [True]  # "a" back at the head
    # "a" left and came back: it counts as arrived meanwhile, and the front of the line takes
    # the place a handed-out job had (here: after the page's). d and e, there all along, follow.
    assert _keys(_page(store, "ready", 10, first[-1])) == ["a", "d", "e"]


def test_lower_priorities_follow_and_a_higher_one_that_came_meanwhile_is_not_shown() -> None:
    store = Store()
    _ready(store, "a", "b", "c", priority=5)
    _ready(store, "low", priority=1)
    first = _page(store, "ready", 2)
    _ready(store, "urgent", priority=9)
    store.take(("q",), 3, NOW, None, None)  # urgent, a, b
    assert _keys(_page(store, "ready", 10, first[-1])) == ["c", "low"]


def test_a_finished_key_finished_again_does_not_start_the_done_list_over() -> None:
    store = Store()
    _ready(store, "a", "b", "c", "d")
    for job in store.take(("q",), 4, NOW, None, None):
        store.done([job.id], at=NOW + ord(job.key))  # type: ignore[arg-type]
    first = _page(store, "done", 2)
    assert _keys(first) == ["d", "c"]
    _ready(store, "c")
    [again] = store.take(("q",), 1, NOW, None, None)
    store.done([again.id], at=NOW + 1000)
    # "c" is the newest now; the page goes on after where it stood, not from the top.
    assert _keys(_page(store, "done", 10, first[-1])) == ["b", "a"]


def test_a_ready_position_from_another_store_is_placed_by_the_key_or_else_repeats_rather_than_skips() -> None:
    mine, other = Store(), Store()
    for store in (mine, other):
        _ready(store, *"abcdef")
    first = _page(mine, "ready", 3)
    assert _keys(_page(other, "ready", 10, first[-1])) == ["d", "e", "f"]  # "c" still there
    other.take(("q",), 4, NOW, None, None)
    assert _keys(_page(other, "ready", 10, first[-1])) == ["e", "f"]  # gone: its line again


def test_a_dead_position_from_another_store_repeats_the_rows_of_its_time_rather_than_skip() -> None:
    mine, other = Store(), Store()
    for store in (mine, other):
        _ready(store, *"abcdef")
        for job in store.take(("q",), 6, NOW, None, None):  # died at a, b=c, d=e, f
            store.fail(job.id, b"ValueError: x", NOW + ord(job.key) // 2, dead=True)  # type: ignore[arg-type]
    first = _page(mine, "dead", 2)
    assert _keys(first) == ["f", "e"]
    assert _keys(_page(other, "dead", 10, first[-1])) == ["d", "c", "b", "a"]  # by the key
    other.delete("q", ["e"])
    # By its time: d died with e, so it could have been before or after it (here after).
    assert _keys(_page(other, "dead", 10, first[-1])) == ["d", "c", "b", "a"]
    other.delete("q", ["d"])
    assert _keys(_page(other, "dead", 10, first[-1])) == ["c", "b", "a"]
