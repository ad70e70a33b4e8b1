"""What `slotmap schedules`, `/api/schedules` and the Schedules page show of a schedule (pure):
its rule written in full, and the next fire of the rule the active manager fires."""
from __future__ import annotations

import pytest

from config.schedules import ScheduleConfig
from manager.schedules.state import ScheduleState
from manager.schedules.view import describe, schedule_rows

NOW_UNIX = 1_795_945_301.0  # 2026-11-29T09:41:41Z


@pytest.mark.parametrize(("every_s", "shown"), [
    (10.0, "every 10 s"), (2.5, "every 2.5 s"), (1234.567, "every 1234.567 s"),
    (31_622_400.0, "every 31622400 s"), (86_399.999, "every 86399.999 s"),
])
def test_an_every_s_rule_is_shown_to_the_millisecond_not_cut_to_six_digits(every_s: float, shown: str) -> None:
    assert describe(ScheduleConfig(every_s=every_s, queue="q")) == shown


def test_after_a_reload_the_next_fire_is_the_rule_the_manager_fires_not_the_files_old_one() -> None:
    """A dashboard started before the reload holds the old file (every 2.5 s): it showed the next
    fire of that rule while the manager fired every 4 s."""
    old, new = ScheduleConfig(every_s=2.5, queue="q"), ScheduleConfig(every_s=4.0, queue="q")
    [row] = schedule_rows({"frac": old}, {"frac": ScheduleState("frac", running_rule=new)}, now_unix=NOW_UNIX)
    assert row.next_fire_unix == 1_795_945_304.0  # the next multiple of 4 s, not of 2.5 s (302.5)
    assert row.manager_differs == "manager runs: every 4 s, queue q"


def test_a_schedule_the_manager_no_longer_fires_has_no_next_fire() -> None:
    rule = ScheduleConfig(every_s=1.0, queue="q")
    states = {"tiny": ScheduleState("tiny"), "kept": ScheduleState("kept", running_rule=rule)}
    rows = {row.name: row for row in schedule_rows({"tiny": rule, "kept": rule}, states, now_unix=NOW_UNIX)}
    assert rows["tiny"].next_fire_unix is None and rows["tiny"].manager_differs == "not running"
    assert rows["kept"].next_fire_unix == NOW_UNIX + 1


def test_with_no_manager_rules_known_the_files_rule_gives_the_next_fire() -> None:
    [row] = schedule_rows({"pulse": ScheduleConfig(every_s=10, queue="q")}, {}, now_unix=NOW_UNIX)
    assert row.next_fire_unix == 1_795_945_310.0
