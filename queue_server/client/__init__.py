"""The queue server's client library: QueueClient (blocking) and AsyncQueueClient (asyncio),
two faces of one sans-I/O API (operations.py over core.py), with the errors they raise.
The wire format itself is queue_server.protocol; nothing here imports the server."""
from __future__ import annotations

from typing import TYPE_CHECKING

from queue_server.client.results import JobFailedError, JobNotFinished, NoResult
from queue_server.client.sync import QueueClient
from queue_server.protocol.client_errors import (
    AuthError,
    BadReply,
    ConnectionLost,
    OfflineError,
    QueueServerError,
    ReplyTimeout,
    ServerUnreachable,
    WaitWoken,
)

if TYPE_CHECKING:
    from queue_server.client.aio import AsyncQueueClient


def __getattr__(name: str) -> object:
    # AsyncQueueClient on first use: importing asyncio costs 0.05 s of CPU that the blocking
    # users (slots, masters, the manager, the CLI commands) would pay at every start.
    if name == "AsyncQueueClient":
        from queue_server.client.aio import AsyncQueueClient

        return AsyncQueueClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AsyncQueueClient",
    "AuthError",
    "BadReply",
    "ConnectionLost",
    "JobFailedError",
    "JobNotFinished",
    "NoResult",
    "OfflineError",
    "QueueClient",
    "QueueServerError",
    "ReplyTimeout",
    "ServerUnreachable",
    "WaitWoken",
]
