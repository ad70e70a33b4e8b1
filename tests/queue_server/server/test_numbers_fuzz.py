"""Hypothesis over every numeric field of every request (issue 16): whatever the number (5,000
digits, inf, nan, an exponent, a sign, a bound plus one), a real server answers with a
known status, the connection goes on (unless the reply closes it by design: 413), another
client is served, and a restart afterwards replays every record the server wrote.

The parsers themselves are covered in tests/queue_server/protocol/test_numbers.py."""
from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queue_server.protocol import numbers
from tests.conftest import QueueServer, RawClient, StartServer
from tests.queue_server.util import barrier

KNOWN_STATUS = re.compile(rb"(200|206|400|401|404|409|413|500) ")
DATA = b"x\r\n"  # 3 bytes that keep reply lines apart when a job comes back
MAX_JOB_BYTES = 1024 * 1024  # the server's default max_job_bytes
PREFIX = b"PUT fz 0 3\r\n" + DATA  # a job for GETB to take at once, and an ack before the number


@dataclass(frozen=True)
class Template:
    """A request with `%s` for each number; `data`: a block follows; `holds`: a 2xx reply may
    keep the connection (PUT ... WAIT, a replication link), so nothing is sent after it;
    `length`: the number is the block length itself."""

    line: bytes
    data: bool = False
    holds: bool = False
    length: bool = False


TEMPLATES = [
    Template(b"PUT fz %s 3", data=True),
    Template(b"PUT fz 0 %s", length=True),
    Template(b"PUT fz 0 3 DELAY %s TTL %s", data=True),
    Template(b"PUT fz 0 3 NEW WAIT fzout EXPIRE %s THEN LATER", data=True, holds=True),
    Template(b"GET fz COUNT %s EXPIRE %s THEN LATER"),
    Template(b"GETB fz|fz2 EXPIRE %s COUNT %s KEYS"),
    Template(b"GETBE fz EXPIRE %s"),
    Template(b"DONE %s %s"),
    Template(b"LATER %s DELAY %s"),
    Template(b"TOUCH %s EXPIRE %s"),
    Template(b"FAIL %s DELAY %s SOLO 3", data=True),
    Template(b"FAIL 1 %s", length=True),
    Template(b"JOBS fz ready LIMIT %s"),
    Template(b"INTERCONNECT %s 127.0.0.1 %s", holds=True),
    Template(b"SYNC PUT fz %s 3 UNTIL %s TTL %s ATTEMPTS %s", data=True),
    Template(b"SYNC PUT fz 0 3 DELAY %s ERROR %s", data=True),
    Template(b"SYNC DONE %s"),
    Template(b"SYNC LATER %s UNTIL %s"),
    Template(b"SYNC WAKE %s"),
    Template(b"SYNC TOUCH %s %s"),
    Template(b"SYNC FAIL %s AT %s UNTIL %s 3", data=True),
    Template(b"SYNC DEAD fz %s 3 KEY fzdead ATTEMPTS %s DIED %s AT %s", data=True),
]
# Not fuzzed: SYNC IDS and SYNC GET set the id counter; one next to its bound makes ids the
# replay refuses (docs/PROTOCOL.md "Numbers"). Their parsing is fuzzed in test_numbers.py.

BOUNDS = [numbers.MAX_SECONDS, numbers.MAX_UNIX_TIME, numbers.ID_MAX, numbers.INT64_MAX,
          numbers.INT64_MIN, numbers.PORT_MAX, numbers.COUNT_MAX]
number_tokens = st.one_of(
    st.integers(-(10**25), 10**25).map(lambda n: b"%d" % n),
    st.sampled_from(BOUNDS).flatmap(lambda b: st.sampled_from([b - 1, b, b + 1])).map(lambda n: b"%d" % n),
    st.integers(19, 6000).map(lambda n: b"9" * n),
    st.integers(1, 6000).map(lambda n: b"0" * n + b"1"),
    st.floats().map(lambda f: repr(f).encode()),
    st.sampled_from([b"inf", b"-inf", b"nan", b"NaN", b"1e400", b"1e-400", b"1E5", b"0x10", b"1_0",
                     b"+1", b"-0", b".5", b"5.", b".", b"-", b"1.5.5", b"\xd9\xa3", b"\xef\xbc\x91"]),
    st.from_regex(rb"[0-9.eE+-]{1,40}", fullmatch=True),
)


def _block_for(template: Template, token: bytes) -> bytes | None:
    """The block that must follow, or None for a length over the limit (413, then close)."""
    if not template.length:
        return DATA if template.data else b""
    if re.fullmatch(rb"[0-9]+", token) is None:
        return b""  # a bad length: 400, nothing consumed
    if len(token) > numbers.MAX_LENGTH_DIGITS or int(token) > MAX_JOB_BYTES:
        return None
    return b"y" * int(token)


def _check(client: RawClient, template: Template, request: bytes) -> None:
    client.expect(b"200 OK\r\n")  # the PUT before the number is acknowledged
    status = client.line()
    assert KNOWN_STATUS.match(status + b" "), f"{request[:120]!r}: {status[:200]!r}"
    if status.startswith(b"413"):
        assert client.closed(), f"{request[:120]!r}: 413 must close the connection"
        return
    if template.holds and status[:1] == b"2":
        return
    client.send(b"PING\r\n")
    line = status
    while not line.endswith(b"200 PONG"):  # the rest of a multi-line reply, then the PONG
        line = client.line()


@pytest.mark.timeout(600)  # 300 examples on a busy 2-core CI machine
def test_every_numeric_field_gets_a_clean_reply_and_the_log_replays(
        start_queue_server: StartServer) -> None:
    server = start_queue_server("--fsync", "always")
    control = server.connect()

    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(template=st.sampled_from(TEMPLATES), tokens=st.lists(number_tokens, min_size=4, max_size=4))
    def run(template: Template, tokens: list[bytes]) -> None:
        line = template.line % tuple(tokens[: template.line.count(b"%s")])
        block = _block_for(template, tokens[0] if template.line.count(b"%s") else b"")
        request = PREFIX + line + b"\r\n" + (block or b"")
        client = RawClient(server.host, server.port)
        try:
            client.send(request)
            if block is None:
                client.expect(b"200 OK\r\n413 Job Too Large\r\n")
            else:
                _check(client, template, request)
        finally:
            client.close()
        barrier(control)
        assert server.is_running(), server.output_text()
        assert "Traceback" not in server.output_text(), server.output_text()

    run()
    _restart_replays_everything(start_queue_server, server)


def _restart_replays_everything(start_queue_server: StartServer, server: QueueServer) -> None:
    server.terminate()
    assert server.wait_exit() == 0, server.output_text()
    restarted = start_queue_server("--fsync", "always", data_dir=server.data_dir)
    assert "recovery:" not in restarted.output_text(), restarted.output_text()
    assert restarted.connect().request(b"PING") == b"200 PONG"
