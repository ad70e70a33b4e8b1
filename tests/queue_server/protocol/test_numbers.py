"""queue_server/protocol/numbers.py: every number a request line or SYNC record carries is
bounded before conversion, and whatever the door accepts comes back through the records the
server writes (issue 16: a DELAY of 400 digits became `UNTIL inf`, which no replay read)."""
from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from config.models import QueueConfig, QueueServerConfig
from queue_server.protocol import numbers
from queue_server.protocol import requests as req
from queue_server.protocol.commands import parse_line
from queue_server.protocol.errors import ProtocolError
from queue_server.protocol.keyed import parse_key
from queue_server.server import records

NOW = st.floats(1.0e9, 5.0e9)  # 2001 .. 2128: any clock a server may run on
ACCEPTED_SECONDS = st.floats(0, numbers.MAX_SECONDS)
TEMPLATES = [
    b"PUT q %s 1", b"PUT q 0 %s", b"PUT q 0 1 DELAY %s TTL %s", b"PUT q 0 1 NEW WAIT o EXPIRE %s",
    b"GET q COUNT %s EXPIRE %s", b"GETB EXPIRE %s", b"DONE %s %s", b"LATER %s DELAY %s",
    b"TOUCH %s EXPIRE %s", b"FAIL %s DELAY %s %s", b"JOBS q ready LIMIT %s",
    b"SNAPSHOT %s 127.0.0.1 %s", b"SYNC PUT q %s %s UNTIL %s TTL %s", b"SYNC PUT q 0 1 ATTEMPTS %s ERROR %s",
    b"SYNC GET q %s %s UNTIL %s THEN DONE", b"SYNC DONE %s", b"SYNC LATER %s UNTIL %s", b"SYNC WAKE %s",
    b"SYNC IDS %s %s %s", b"SYNC TOUCH %s %s", b"SYNC FAIL %s AT %s UNTIL %s %s",
    b"SYNC DEAD q %s %s KEY k ATTEMPTS %s DIED %s",
    b"REPLACK %s", b"REPLACK %s %s", b"LEASE %s %s %s", b"LEASE %s %s %s ALONE", b"LEASE %s %s %s %s",
    b"PROMOTE %s", b"FOLLOW 127.0.0.1:%s %s",
]
tokens = st.one_of(
    st.integers(-(10**40), 10**40).map(lambda n: b"%d" % n),
    st.integers(1, 6000).map(lambda n: b"9" * n),
    st.floats().map(lambda f: repr(f).encode()),
    st.from_regex(rb"[0-9.eE+_-]{1,50}", fullmatch=True),
    st.binary(min_size=1, max_size=8).filter(lambda b: not any(c in b for c in b" \t\r\n\x0b\x0c")),
)


@given(st.sampled_from(TEMPLATES), st.lists(tokens, min_size=4, max_size=4))
def test_any_number_in_any_field_parses_or_gets_a_protocol_error(template: bytes, values: list[bytes]) -> None:
    line = template % tuple(values[: template.count(b"%s")])
    try:
        parsed = parse_line(line)
    except ProtocolError as error:
        assert error.reply.startswith(b"400 "), error.reply
        return
    for value in _fields(parsed.command):
        if isinstance(value, float):
            assert math.isfinite(value) and 0 <= value <= numbers.MAX_UNIX_TIME, line


def _fields(command: object) -> list[object]:
    return [getattr(command, field.name) for field in dataclasses.fields(command)] if command else []  # type: ignore[arg-type]


@given(ACCEPTED_SECONDS, NOW)
def test_every_deadline_the_door_accepts_is_a_time_the_replay_accepts(seconds: float, now: float) -> None:
    wire = req.seconds(seconds, what="delay_s")  # the client's encoder
    accepted = numbers.parse_seconds(wire, "DELAY")
    until = now + accepted
    for record in (records.later([7], until), records.put("q", 0, b"x", None, until, ttl_at=until + accepted),
                   records.get("q", 7, 0, False, until, True), records.touch(7, until),
                   records.fail(7, now, until, False, "e"), records.wake(until)):
        line = record.split(b"\r\n", 1)[0]
        command = parse_line(line).command
        assert command is not None, record
        assert until in _fields(command), (record, command)


@given(st.floats(0, numbers.MAX_UNIX_TIME))
def test_a_unix_time_written_as_records_write_it_reads_back_exactly(value: float) -> None:
    assert numbers.parse_unix_time(repr(value).encode()) == value


@pytest.mark.parametrize("raw, accepted", [
    (b"%d" % numbers.MAX_SECONDS, True), (b"%d.000001" % numbers.MAX_SECONDS, False),
    (b"9" * 400, False), (b"0", True), (b".5", True), (b"1e3", False), (b"inf", False), (b"-1", False),
])
def test_seconds_bounds(raw: bytes, accepted: bool) -> None:
    if accepted:
        assert numbers.parse_seconds(raw, "DELAY") == float(raw)
    else:
        with pytest.raises(ProtocolError, match="DELAY"):
            numbers.parse_seconds(raw, "DELAY")


@pytest.mark.parametrize("raw", [b"inf", b"nan", b"-1", b"1e12", b"1_0", b"+5", b" 5", b"9" * 5000])
def test_unix_times_outside_the_bounds_are_refused(raw: bytes) -> None:
    with pytest.raises(ProtocolError, match="unix time"):
        numbers.parse_unix_time(raw)


def test_integers_of_any_length_get_400_naming_the_bound_never_a_value_error() -> None:
    huge = b"9" * 5000
    for parse, message in ((numbers.parse_id, "at most 999999999999999999"),
                           (numbers.parse_priority, "64-bit"), (numbers.parse_count, "1..9223372036854775807"),
                           (numbers.parse_port, "1..65535"), (numbers.parse_counter, "0..1000000000000000000")):
        with pytest.raises(ProtocolError, match=message):
            parse(huge)  # type: ignore[operator]
    assert numbers.parse_length(huge) == numbers.LENGTH_OVER_ANY_LIMIT
    assert numbers.parse_id(b"%d" % numbers.ID_MAX) == numbers.ID_MAX
    assert numbers.parse_priority(b"%d" % numbers.INT64_MIN) == numbers.INT64_MIN


def test_a_name_stands_for_a_counter_only_within_its_bound() -> None:
    assert parse_key(b"_%d" % numbers.ID_MAX) == numbers.ID_MAX
    assert parse_key(b"_1" + b"0" * 18) == "_1" + "0" * 18  # 19 digits: a plain key
    assert numbers.counter_of_name("_" + "9" * 127) is None
    assert numbers.counter_of_name("_042") is None and numbers.counter_of_name("_42") == 42


@pytest.mark.parametrize("seconds", [math.inf, math.nan, numbers.MAX_SECONDS * 10.0])
def test_config_durations_the_server_adds_to_now_are_bounded_as_the_door_bounds_expire(seconds: float) -> None:
    """A lock time or retry delay from the config becomes a logged deadline, like EXPIRE."""
    for make in (lambda: QueueConfig(lock_timeout_s=seconds), lambda: QueueConfig(retry_max_s=seconds),
                 lambda: QueueServerConfig(lock_timeouts_s={"q": seconds})):
        with pytest.raises(ValidationError):
            make()
    assert QueueConfig(lock_timeout_s=numbers.MAX_SECONDS, retry_max_s=numbers.MAX_SECONDS).lock_timeout_s == numbers.MAX_SECONDS
