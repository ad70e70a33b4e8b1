"""A request the server refuses: the error carries the exact status line the client receives."""
from __future__ import annotations


class ProtocolError(Exception):
    """A request that gets an error reply; `reply` is the status line without CRLF."""

    def __init__(self, reply: bytes, *, close: bool = False) -> None:
        super().__init__(reply.decode("ascii", "replace"))
        self.reply = reply
        self.close = close


def bad_request(why: str) -> ProtocolError:
    return ProtocolError(b"400 Bad Request: " + why.encode("ascii", "replace"))


UNKNOWN_COMMAND = ProtocolError(b"400 Unknown Command")

