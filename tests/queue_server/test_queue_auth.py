"""AUTH: with a token configured every other command needs it first, per connection."""
from __future__ import annotations

import pytest
from util import get_job, put_ok, total

TOKEN = "s3cret_T0ken"
TOKEN_CONFIG = f'[queue_server]\ntoken = "{TOKEN}"\n'


@pytest.fixture(scope="module")
def auth_server(start_module_server):
    return start_module_server(config=TOKEN_CONFIG)


@pytest.mark.parametrize("request_line", [
    b"PING", b"TOTAL", b"GET", b"GET q", b"GETB q", b"DONE 1", b"LATER 1", b"STATS", b"RUNLIST",
    b"SNAPSHOT", b"OFFLINE", b"ONLINE", b"INTERCONNECT", b"SHUTDOWN", b"SYNC DONE 1",
])
def test_every_command_before_auth_gets_401_auth_required(auth_server, request_line):
    client = auth_server.connect()
    client.send(request_line + b"\r\n")
    client.expect(b"401 Auth Required\r\n")
    assert auth_server.is_running()


def test_put_before_auth_gets_401_and_its_data_block_is_still_consumed(auth_server):
    client = auth_server.connect()
    client.send(b"PUT unauthorized 0 4\r\nPINGPING\r\n")
    client.expect(b"401 Auth Required\r\n401 Auth Required\r\n")
    client.send(f"AUTH {TOKEN}\r\n".encode())
    client.expect(b"200 OK\r\n")
    assert total(client, "unauthorized") == (0, 0, 0, 0)


def test_wrong_token_gets_401_unauthorized_and_the_connection_stays_locked(auth_server):
    client = auth_server.connect()
    client.send(b"AUTH wrong\r\nPING\r\n")
    client.expect(b"401 Unauthorized\r\n401 Auth Required\r\n")


def test_right_token_unlocks_the_connection(auth_server):
    client = auth_server.connect()
    client.send(f"AUTH {TOKEN}\r\nPING\r\n".encode())
    client.expect(b"200 OK\r\n200 PONG\r\n")
    put_ok(client, "authorized", 0, b"x")
    assert get_job(client, "GET authorized").data == b"x"


def test_right_token_after_a_wrong_one_unlocks_the_connection(auth_server):
    client = auth_server.connect()
    client.send(f"AUTH nope\r\nAUTH {TOKEN}\r\nPING\r\n".encode())
    client.expect(b"401 Unauthorized\r\n200 OK\r\n200 PONG\r\n")


def test_auth_is_per_connection(auth_server):
    first, second = auth_server.connect(), auth_server.connect()
    first.send(f"AUTH {TOKEN}\r\n".encode())
    first.expect(b"200 OK\r\n")
    second.send(b"PING\r\n")
    second.expect(b"401 Auth Required\r\n")


def test_empty_lines_before_auth_are_still_ignored(auth_server):
    client = auth_server.connect()
    client.send(f"\r\n\n\r\nAUTH {TOKEN}\r\n".encode())
    client.expect(b"200 OK\r\n")
    client.send(b"PING\r\n")
    client.expect(b"200 PONG\r\n")


def test_token_is_case_sensitive(auth_server):
    client = auth_server.connect()
    client.send(f"AUTH {TOKEN.upper()}\r\n".encode())
    client.expect(b"401 Unauthorized\r\n")


def test_without_a_token_configured_commands_need_no_auth(queue_server):
    client = queue_server.connect()
    client.send(b"PING\r\n")
    client.expect(b"200 PONG\r\n")


def test_token_given_on_the_command_line_is_required_too(start_queue_server):
    client = start_queue_server("--token", "cli_token").connect()
    client.send(b"PING\r\nAUTH cli_token\r\nPING\r\n")
    client.expect(b"401 Auth Required\r\n200 OK\r\n200 PONG\r\n")
