"""A config value of the wrong type is an error naming the file, the key and the type expected
(it used to be coerced: `every_s = true` fired a schedule every second, `max_slots = true`
was 1 slot, `lock_timeout_s = "30"` was 30 s)."""
from __future__ import annotations

import math
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest

from config.errors import ConfigError
from config.load import load_config, parse_config
from config.models import QueueConfig, RateLimitConfig
from config.reference import keys
from deploy.replicas import write_config
from master.manager_frames import ManagerFrame
from slot.pulsar.protocol import LimitsRequest

EXPECTED = {int: "expected an integer", float: "expected a number", bool: "expected a boolean"}
# Values of another TOML type than each scalar type takes (an integer is a number too).
WRONG: dict[type, tuple[object, ...]] = {int: (True, 2.5, 4.0, "2"), float: (True, "2.5"), bool: (1, "true")}
# What a table of each section needs besides the key tested, to be valid.
TABLE_NEEDS: dict[str, dict[str, object]] = {
    "schedules.<name>": {"every_s": 60, "queue": "q"},
    "queues.<name>.rate_limit": {"permits": 10},
}


def write(folder: Path, text: str) -> Path:
    path = folder / "cluster.toml"
    path.write_text(text)
    return path


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value)


@pytest.mark.parametrize("toml, key, expected, given", [
    ("[queues.q]\nmax_slots = true\n", "queues.q.max_slots", "an integer", "got true (a boolean)"),
    ("[schedules.tick]\nqueue = \"q\"\nevery_s = true\n", "schedules.tick.every_s", "a number",
     "got true (a boolean)"),
    ("[queues.q]\nlock_timeout_s = \"30\"\n", "queues.q.lock_timeout_s", "a number",
     "got \"30\" (a string): write it without the quotes"),
    ("[admin]\nprotect_reads = \"true\"\n", "admin.protect_reads", "a boolean",
     "got \"true\" (a string): write it without the quotes"),
    ("[master]\nmax_slots = 2.5\n", "master.max_slots", "an integer", "got 2.5 (a decimal number)"),
    ("[master]\nbeacon_interval_ms = 200.0\n", "master.beacon_interval_ms", "an integer",
     "got 200.0 (a decimal number)"),
    ("[queue_server]\nmanaged_failover = 1\n", "queue_server.managed_failover", "a boolean",
     "got 1 (an integer)"),
    ("[queue_server]\nlock_timeouts_s = { q = true }\n", "queue_server.lock_timeouts_s.q", "a number",
     "got true (a boolean)"),
    ("[master]\nstatic_slots = { q = \"2\" }\n", "master.static_slots.q", "an integer",
     "got \"2\" (a string): write it without the quotes"),
    ("[queues.q]\nrate_limit = { permits = true }\n", "queues.q.rate_limit.permits", "an integer",
     "got true (a boolean)"),
    ("[manager]\nlisten = 7500\n", "manager.listen", "a string", "got an integer"),
])
def test_a_value_of_the_wrong_type_names_the_file_the_key_and_the_type(
    tmp_path: Path, toml: str, key: str, expected: str, given: str,
) -> None:
    path = write(tmp_path, toml)
    assert refusal(path) == f"{path}: {key}: expected {expected} " + {
        "an integer": "(such as 4)", "a number": "(such as 5 or 2.5)", "a boolean": "(true or false)",
        "a string": "(in quotes)"}[expected] + f", {given}"


def _scalar(annotation: Any) -> type | None:
    """int, float or bool for a key of that type (optional or not), else None."""
    args = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    found = [a for a in args if a in (int, float, bool)]
    return found[0] if found else None


def _raw(section: str, key: str, value: object) -> dict[str, Any]:
    table: dict[str, Any] = {**TABLE_NEEDS.get(section, {}), key: value}
    for part in reversed(section.split(".") if section else []):
        table = {{"<name>": "q"}.get(part, part): table}
    if section.startswith("schedules"):
        table.setdefault("queues", {"q": {}})
    return table


SCALAR_KEYS = [(key.section, key.name, kind) for key in keys() if (kind := _scalar(key.field.annotation))]


def test_every_section_has_numbers_and_booleans_to_check() -> None:
    sections = {section for section, _, _ in SCALAR_KEYS}
    assert {"queue_server", "queues.<name>", "queues.<name>.rate_limit", "master", "manager",
            "admin", "pulsar", "schedules.<name>"} <= sections, sections


@pytest.mark.parametrize("section, name, kind", SCALAR_KEYS, ids=[f"{s}.{n}" for s, n, _ in SCALAR_KEYS])
def test_no_number_or_boolean_key_takes_another_type(section: str, name: str, kind: type) -> None:
    where = f"{section}.{name}".replace("<name>", "q").lstrip(".")
    for wrong in WRONG[kind]:
        with pytest.raises(ConfigError) as caught:
            parse_config(_raw(section, name, wrong), source="c.toml")
        assert f"c.toml: {where}: {EXPECTED[kind]}" in str(caught.value), (wrong, str(caught.value))


def test_an_integer_is_a_number(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "[queues.q]\nlock_timeout_s = 30\nrate_limit = { permits = 5, period_s = 2 }\n"
                                         "[schedules.tick]\nqueue = \"q\"\nevery_s = 5\n"
                                         "[queue_server]\nlock_timeouts_s = { q = 7 }\n"))
    assert config.queues["q"].lock_timeout_s == 30.0 and isinstance(config.queues["q"].lock_timeout_s, float)
    assert config.schedules["tick"].every_s == 5.0
    assert config.queues["q"].rate_limit == RateLimitConfig(permits=5, period_s=2.0)
    assert config.queue_server.lock_timeouts_s == {"q": 7.0}


@pytest.mark.parametrize("toml, key", [
    ("[queues.q]\nlock_timeout_s = inf\n", "queues.q.lock_timeout_s"),
    ("[queues.q]\nretry_base_s = nan\n", "queues.q.retry_base_s"),
    ("[schedules.tick]\nqueue = \"q\"\nevery_s = inf\n", "schedules.tick.every_s"),
    ("[queue_server]\nlock_timeouts_s = { q = inf }\n", "queue_server.lock_timeouts_s"),
    ("[master]\nmax_slots = -1\n", "master.max_slots"),
])
def test_numbers_stay_finite_and_bounded(tmp_path: Path, toml: str, key: str) -> None:
    assert f": {key}" in refusal(write(tmp_path, toml))


def test_a_token_of_the_wrong_type_is_not_echoed(tmp_path: Path) -> None:
    text = refusal(write(tmp_path, "[queue_server]\ntoken = 918273645546372819\n"))
    assert "queue_server.token: expected a string (in quotes), got an integer" in text
    assert "918273645546372819" not in text


def test_every_error_of_a_file_is_named_at_once(tmp_path: Path) -> None:
    text = refusal(write(tmp_path, "[queues.q]\nmin_slots = true\nmax_slots = \"3\"\n"))
    assert "queues.q.min_slots: expected an integer" in text and "queues.q.max_slots: expected an integer" in text


def test_what_the_config_sends_and_writes_of_itself_reads_back(tmp_path: Path) -> None:
    """The derived file `slotmap run` hands its children, the queue settings the manager sends
    its masters, and the limits it sends the pulsar are the config's own dumps: strict types
    must read them back (an integer written for a number is a float once loaded)."""
    mine = load_config(write(tmp_path, "[queues.q]\nlock_timeout_s = 30\nmax_slots = 3\n"
                                       "rate_limit = { permits = 5, period_s = 2 }\n"
                                       "[schedules.tick]\nqueue = \"q\"\nevery_s = 5\n"
                                       "[master]\nstatic_slots = { q = 2 }\nmax_load_per_cpu = 8\n"))
    assert load_config(write_config(mine, tmp_path / "var" / "derived.toml")) == mine
    frame = ManagerFrame.decode(ManagerFrame(manager_pid=1, queues=dict(mine.queues), queues_version="v1").encode())
    assert frame.queues == {"q": mine.queues["q"]}
    limits = {"q": RateLimitConfig(permits=5, period_s=2)}
    assert LimitsRequest.model_validate_json(LimitsRequest(id=1, limits=limits).encode()).limits == limits
    assert math.isclose(QueueConfig.model_validate_json(mine.queues["q"].model_dump_json()).lock_timeout_s, 30.0)
