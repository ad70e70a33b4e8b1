"""Errors the queue client raises: one hierarchy under QueueServerError."""
from __future__ import annotations


class QueueServerError(Exception):
    """The server answered with an error status (`code` and the text after it).

    Client-side failures that have no status line (a lost connection, an
    unreadable reply) use code 0.
    """

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code} {text}" if code else text)
        self.code = code
        self.text = text


class OfflineError(QueueServerError):
    """`500 Offline Mode`: the server refuses queue commands until it is switched online."""


class AuthError(QueueServerError):
    """`401 Unauthorized` (a wrong token) or `401 Auth Required` (no token sent)."""


class BadReply(QueueServerError):
    """A reply the client cannot parse; the connection is closed since the stream is out of step."""

    def __init__(self, text: str) -> None:
        super().__init__(0, text)


class ConnectionLost(QueueServerError):
    """The connection broke while a request that changes state may have been half done.

    The request may or may not have taken effect (a PUT may be stored, a GET may
    have handed a job out that now runs until its EXPIRE). The next call
    reconnects; deciding whether to repeat the request is the caller's job.
    """

    def __init__(self, text: str) -> None:
        super().__init__(0, text)


class ServerUnreachable(ConnectionLost):
    """No server of the list accepted a connection (after every reconnect attempt)."""


class WaitWoken(QueueServerError):
    """A blocking wait ended by its wake fd before any reply came; the connection was closed,
    so the server drops the waiter and hands it no job."""

    def __init__(self) -> None:
        super().__init__(0, "blocking wait woken; connection closed")


class ReplyTimeout(ConnectionLost, TimeoutError):
    """No complete reply within the time allowed; the connection was closed."""


def connection_failure(exc: BaseException, *, what: str, server: str) -> ConnectionLost:
    """The client error for an I/O failure (OSError, EOFError, timeout) during `what`."""
    if isinstance(exc, TimeoutError):
        return ReplyTimeout(f"no reply to {what} from {server} in time; connection closed")
    return ConnectionLost(f"connection to {server} lost during {what}: {exc}")


def closes_connection(error: QueueServerError) -> bool:
    """Error replies after which the server closes the connection (PROTOCOL.md, Errors)."""
    return error.code == 413 or (error.code == 400 and error.text == "Line Too Long")
