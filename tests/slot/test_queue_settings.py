"""Handler class vs config: the config's written value wins, and every disagreement is named."""
from __future__ import annotations

from config.load import parse_config
from slot.handler import Handler
from slot.queue_settings import batch_size_in_force, conflicts


class FiveAtATime(Handler):
    batch_size = 5


class Plain(Handler):
    pass


def test_a_batch_size_written_in_the_config_wins_over_the_handler_class() -> None:
    queues = parse_config({"queues": {"a": {"batch_size": 10}, "b": {"priority": 1}}}).queues
    assert batch_size_in_force(queues["a"], FiveAtATime) == 10
    # Left out of the config (its default 10 is not "written"): the class's value.
    assert batch_size_in_force(queues["b"], FiveAtATime) == 5
    assert batch_size_in_force(None, Plain) == 10


def test_a_disagreement_is_reported_with_the_value_in_force() -> None:
    queues = parse_config({"queues": {"a": {"batch_size": 10}, "b": {}, "c": {"batch_size": 5}}}).queues
    found = conflicts(queues, {"a": FiveAtATime, "b": FiveAtATime, "c": FiveAtATime, "d": Plain})
    assert [(c.queue, c.config_value, c.handler_value) for c in found] == [("a", 10, 5)]
    assert "batch_size = 10 in the config wins over" in found[0].message()
    assert "FiveAtATime.batch_size = 5" in found[0].message()


def test_queue_settings_shows_the_batch_size_in_force_and_where_it_comes_from() -> None:
    from slot.settings_cli import rows

    config = parse_config({"queues": {"a": {"batch_size": 10}, "b": {"rate_limit": {"permits": 10}}}})
    lines = rows(config, {"a": FiveAtATime, "b": FiveAtATime})
    by_queue = {line.split()[0]: line for line in lines[1:]}
    assert "10 (config)" in by_queue["a"]
    assert "5 (handler)" in by_queue["b"] and "10/1 s" in by_queue["b"]
