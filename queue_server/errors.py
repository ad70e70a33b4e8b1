"""Errors of the queue server: each carries the exact status line the client receives."""
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


class SnapshotError(Exception):
    """A snapshot or log that cannot be applied; the state it was applied to is unchanged."""


class DataDirLocked(Exception):
    """Another server already owns the data directory."""
