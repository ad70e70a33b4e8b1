"""A token never shows in the repr of what carries it (a log line or an error's text may hold
a repr): the server's parsed AUTH, the client's Send and Request effects."""
from __future__ import annotations

from queue_server.client.effects import Request, Send
from queue_server.protocol.commands import parse_line
from queue_server.protocol.reply_parsers import parse_ok

TOKEN = "repr-secret-token-42"


def test_a_parsed_auth_hides_its_token() -> None:
    parsed = parse_line(f"AUTH {TOKEN}".encode())
    assert parsed.command is not None and parsed.command.token == TOKEN.encode()  # type: ignore[union-attr]
    assert TOKEN not in repr(parsed) and TOKEN not in repr(parsed.command)


def test_the_clients_effects_hide_the_bytes_they_send() -> None:
    sent = f"AUTH {TOKEN}\r\n".encode()
    assert TOKEN not in repr(Send(None, sent))
    assert TOKEN not in repr(Request(None, sent, parse=parse_ok, timeout_s=None))
