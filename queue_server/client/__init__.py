"""The queue server's client library: QueueClient (blocking) and AsyncQueueClient (asyncio),
two faces of one sans-I/O API (operations.py over core.py), with the errors they raise.
The wire format itself is queue_server.protocol; nothing here imports the server."""
from __future__ import annotations

from queue_server.client.aio import AsyncQueueClient
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
