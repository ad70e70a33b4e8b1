"""Fuzzing the request parser over a real connection while a second client keeps working."""
from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from util import barrier

from queue_server.server.guard import cross_protocol

KNOWN_STATUS = re.compile(rb"(200|206|221|400|401|404|409|413|500) ")
# Commands that would change the server for everyone (or hand out ids of their own) are left out.
FORBIDDEN = (b"OFFLINE", b"SHUTDOWN", b"SNAPSHOT", b"INTERCONNECT", b"SYNC", b"CLONE")
WORDS = [
    b"GET", b"GETB", b"GETBE", b"PUT", b"DONE", b"LATER", b"TOTAL", b"STATS", b"RUNLIST", b"PING",
    b"AUTH", b"QUIT", b"ONLINE", b"IS", b"NEW", b"WAIT", b"EXPIRE", b"THEN", b"COUNT", b"DELAY",
    b"DATA", b"FAIL", b"TOUCH", b"JOB", b"JOBS", b"RETRY", b"DELETE", b"KEY", b"KEYS", b"ALL",
    b"DEAD", b"SOLO", b"FRONT", b"LIMIT", b"AFTER", b"*", b"q", b"fz", b"a|b", b"||", b"_1", b"-1", b"0", b"1", b"3", b"17", b"65537",
    b"9223372036854775808", b"1e9", b"0.5", b"nan", b"\xff\xfe",
]
SEPARATORS = [b" ", b"  ", b"\t", b"\r\n", b"\n", b"\r", b""]

token_soup = st.lists(
    st.tuples(st.one_of(st.sampled_from(WORDS), st.binary(max_size=6)), st.sampled_from(SEPARATORS)),
    max_size=14,
).map(lambda parts: b"".join(word + sep for word, sep in parts))
payloads = st.tuples(
    st.one_of(st.binary(max_size=300), token_soup),
    st.booleans(),
).map(lambda pair: pair[0] + (b"\r\n" if pair[1] else b""))

CONTROL_DATA = bytes(range(256)) + b"\r\nPUT zzcontrol 0 1\r\n"


def _control_round_trip(control) -> None:
    """The second client's PUT/GET/DONE must be exactly right."""
    control.send(b"PUT zzcontrol 5 %d IS zzitem\r\n" % len(CONTROL_DATA) + CONTROL_DATA)
    control.expect(b"200 OK\r\n")
    control.send(b"GET zzcontrol\r\n")
    line = control.line()
    match = re.fullmatch(rb"200 OK zzcontrol ([0-9]+) 5 %d IS zzitem" % len(CONTROL_DATA), line)
    assert match, line
    control.expect(CONTROL_DATA)
    control.send(b"DONE %s\r\n" % match[1])
    control.expect(b"200 OK FINQ FINI\r\n")


def test_random_bytes_never_crash_the_server_nor_disturb_another_client(queue_server):
    control = queue_server.connect()

    @settings(max_examples=100, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(payload=payloads)
    def run(payload: bytes) -> None:
        upper = payload.upper()
        assume(not any(word in upper for word in FORBIDDEN))
        fuzz = queue_server.connect(timeout_s=2.0)
        try:
            fuzz.send(payload)
        except OSError:
            pass  # the server may already have closed (line too long, 413)
        barrier(control)  # the server has handled everything the fuzz client sent
        replies = fuzz.pending()
        if replies:
            assert KNOWN_STATUS.match(replies), f"reply to {payload!r} has no known status: {replies!r}"
        fuzz.close()
        barrier(control)  # the server has seen the fuzz client go away
        assert queue_server.is_running(), f"server died on {payload!r}\n{queue_server.output_text()}"
        _control_round_trip(control)

    run()
    assert queue_server.is_running()


def test_random_lines_that_name_no_command_get_400_unknown_command(queue_server):
    client = queue_server.connect()
    known = {word.upper() for word in WORDS + list(FORBIDDEN)} | {b"SHUTDOWN", b"AUTH"}

    @settings(max_examples=100, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(garbage=st.lists(st.integers(0, 255).filter(lambda b: b not in (10, 13)),
                            min_size=1, max_size=200).map(bytes))
    def run(garbage: bytes) -> None:
        words = garbage.split()
        assume(words and not garbage[:1].isspace() and words[0].upper() not in known)
        # An HTTP-looking line (`x:` as a header, `POST`, `... HTTP/1.1`) closes the
        # connection instead (tests/queue_server/server/test_http_guard.py).
        assume(cross_protocol(garbage) is None)
        client.send(garbage + b"\r\n")
        client.expect(b"400 Unknown Command\r\n")

    run()
    client.send(b"PING\r\n")
    client.expect(b"200 PONG\r\n")
