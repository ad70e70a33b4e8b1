"""The door's pure decisions (queue_server/server/guard.py): no socket, no clock."""
from __future__ import annotations

import pytest

from queue_server.protocol.commands import parse_line
from queue_server.protocol.errors import ProtocolError
from queue_server.server import guard

HTTP_LINES = [b"GET / HTTP/1.1", b"POST /queue HTTP/1.1", b"PUT /x HTTP/1.0", b"DELETE / HTTP/1.1",
              b"OPTIONS * HTTP/1.1", b"GET q HTTP/1.1", b"post / http/1.1", b"POST",
              b"Host: 127.0.0.1:7400", b"host: x", b"Content-Type: text/plain",
              b"Origin: null", b"Connection: keep-alive", b"CONNECT a:1 HTTP/1.1"]
QUEUE_LINES = [b"GET", b"GET q", b"GET a|b|c EXPIRE 5 THEN DONE", b"GETB q COUNT 10",
               b"PUT q 0 5", b"PUT q -3 5 IS item WAIT out EXPIRE 2", b"DONE 1 2 3", b"STATS q",
               b"AUTH tok:en", b"SYNC GET q 1 0", b"TOTAL", b"PING"]


@pytest.mark.parametrize("line", HTTP_LINES)
def test_http_request_lines_and_headers_are_recognised(line):
    assert guard.cross_protocol(line) is not None


@pytest.mark.parametrize("line", QUEUE_LINES)
def test_queue_commands_are_not_taken_for_http(line):
    assert guard.cross_protocol(line) is None


@pytest.mark.parametrize("line", [line for line in HTTP_LINES if not line.startswith((b"POST", b"post"))])
def test_every_http_line_fails_to_parse_so_the_guard_costs_nothing_on_good_requests(line):
    # connection.py asks the guard only after parse_line refused a line (after AUTH)
    with pytest.raises(ProtocolError):
        parse_line(line)


def test_auth_delay_doubles_from_a_tenth_of_a_second_and_is_capped():
    delays = [guard.auth_delay_s(n) for n in range(1, 10)]
    assert delays[:4] == [0.1, 0.2, 0.4, 0.8]
    assert delays == sorted(delays)
    assert max(delays) == guard.AUTH_DELAY_MAX_S


@pytest.mark.parametrize(("peer", "loopback"), [
    (("127.0.0.1", 1), True), (("127.8.9.1", 1), True), (("::1", 1, 0, 0), True),
    (("::ffff:127.0.0.1", 1, 0, 0), True), (("10.0.0.1", 1), False), (("::ffff:10.0.0.1", 1, 0, 0), False),
    (None, False), (("not an address", 1), False),
])
def test_loopback_peers(peer, loopback):
    assert guard.is_loopback(peer) is loopback
