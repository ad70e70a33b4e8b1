"""Whether the server a blocking wait is on still answers (follow.py WAIT_CHECK_S): a PING
on a new connection, within connect_timeout_s for the connection and each reply."""
from __future__ import annotations

from typing import Any

from queue_server.client.core import ClientCore
from queue_server.client.effects import Op, Open, Request
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import QueueServerError
from queue_server.protocol.reply_parsers import parse_ok
from queue_server.protocol.requests import Address


def answers(client: ClientCore[Any], address: Address) -> Op[bool]:
    """False when the server refuses the connection or leaves AUTH or PING unanswered (a
    frozen one accepts in its kernel and never answers); an error reply is an answer."""
    try:
        conn = yield Open(address)
    except OSError:  # refused, unreachable, or the connect timed out
        return False
    try:
        if client._auth is not None:
            yield Request(conn, client._auth, parse_ok, client.connect_timeout_s)
        yield Request(conn, req.PING, parse_ok, client.connect_timeout_s)
    except (OSError, EOFError):  # no reply in time (TimeoutError), or the connection cut
        return False
    except QueueServerError:  # 401 or 500: refused, but by a server that runs
        return True
    finally:
        conn.close()
    return True
