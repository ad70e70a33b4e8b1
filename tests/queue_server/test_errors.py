"""Error rules beyond the case files (cases/errors/): the 64 KiB line limit, 413, broken clients."""
from __future__ import annotations

import threading

from util import assert_bad_request, barrier, get_job, put_ok, total

LINE_LIMIT = 65536


def _send_until_closed(client, data: bytes) -> None:
    """Send `data`; the server may close (and reset) before it has read everything."""
    try:
        client.send(data)
    except OSError:
        pass


def _assert_still_usable(client) -> None:
    client.send(b"PING\r\n")
    client.expect(b"200 PONG\r\n")


def test_line_of_exactly_64_kib_is_not_too_long(queue_server):
    client = queue_server.connect()
    client.send(b"X" * LINE_LIMIT + b"\r\n")
    client.expect(b"400 Unknown Command\r\n")
    client.send(b"GET " + b"a" * (LINE_LIMIT - 4) + b"\n")
    assert_bad_request(client.line())
    _assert_still_usable(client)


def test_line_of_64_kib_plus_one_replies_line_too_long_and_closes(queue_server):
    client = queue_server.connect()
    _send_until_closed(client, b"X" * (LINE_LIMIT + 1) + b"\r\n")
    client.expect(b"400 Line Too Long\r\n")
    assert client.closed()
    assert client.pending() == b""


def test_overlong_line_without_terminator_is_refused_without_waiting_for_one(queue_server):
    client = queue_server.connect()
    _send_until_closed(client, b"Y" * (LINE_LIMIT + 1000))
    client.expect(b"400 Line Too Long\r\n")
    assert client.closed()


def test_65537_bytes_without_terminator_are_refused_at_once(queue_server):
    client = queue_server.connect()
    client.send(b"W" * (LINE_LIMIT + 1))
    client.expect(b"400 Line Too Long\r\n")
    assert client.closed()


def test_crlf_split_right_at_the_limit_still_ends_a_line_of_exactly_64_kib(queue_server):
    client, observer = queue_server.connect(), queue_server.connect()
    client.send(b"X" * LINE_LIMIT + b"\r")
    barrier(observer)
    client.send(b"\n")
    client.expect(b"400 Unknown Command\r\n")
    _assert_still_usable(client)


def test_line_too_long_does_not_disturb_other_clients(queue_server):
    bad, good = queue_server.connect(), queue_server.connect()
    put_ok(good, "q", 0, b"x")
    _send_until_closed(bad, b"Z" * (LINE_LIMIT * 3))
    bad.expect(b"400 Line Too Long\r\n")
    assert total(good, "q") == (1, 1, 1, 0)


SMALL_LIMIT_CONFIG = "[queue_server]\nmax_job_bytes = 16\n"


def test_job_at_the_configured_size_limit_is_accepted(reused_queue_server):
    client = reused_queue_server(config=SMALL_LIMIT_CONFIG).connect()
    put_ok(client, "q", 0, b"x" * 16)
    assert get_job(client, "GET q").data == b"x" * 16


def test_job_over_the_configured_size_limit_replies_413_and_closes(reused_queue_server):
    server = reused_queue_server(config=SMALL_LIMIT_CONFIG)
    client = server.connect()
    _send_until_closed(client, b"PUT q 0 17\r\n" + b"y" * 17)
    client.expect(b"413 Job Too Large\r\n")
    assert client.closed()
    assert client.pending() == b""
    assert total(server.connect()) == (0, 0, 0, 0)


def test_413_line_arrives_even_while_the_client_keeps_sending_the_block(queue_server):
    client = queue_server.connect()
    size = 4 * 1024 * 1024
    client.send(b"PUT q 0 %d\r\n" % size)

    def keep_sending() -> None:
        try:
            client.sock.sendall(b"z" * size)
        except OSError:
            pass  # the server closed its side after the 413, as it should

    sender = threading.Thread(target=keep_sending, daemon=True)
    sender.start()
    client.expect(b"413 Job Too Large\r\n")
    assert not client.reset, "connection was reset before the 413 line could be read"
    sender.join(timeout=10)
    assert total(queue_server.connect()) == (0, 0, 0, 0)


def test_default_size_limit_is_one_mebibyte(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"m" * (1024 * 1024))
    client.send(b"PUT q 0 %d\r\n" % (1024 * 1024 + 1))
    client.expect(b"413 Job Too Large\r\n")
    assert client.closed()


def test_disconnect_in_the_middle_of_a_data_block_drops_only_the_partial_job(queue_server):
    observer = queue_server.connect()
    put_ok(observer, "q", 0, b"kept")
    broken = queue_server.connect()
    broken.send(b"PUT q 0 10\r\nabc")
    barrier(observer)
    broken.close()
    barrier(observer)
    assert total(observer) == (1, 1, 1, 0)
    assert get_job(observer, "GET q").data == b"kept"


def test_token_configured_gives_401_auth_required_before_auth(start_queue_server):
    client = start_queue_server(config='[queue_server]\ntoken = "t0ken"\n').connect()
    client.send(b"TOTAL\r\n")
    client.expect(b"401 Auth Required\r\n")
