"""The dashboard's line to the queue server: one short-lived client per request, errors as AdminErrors.

QueueClient is not thread-safe and FastAPI runs sync routes in a thread pool, so each
request opens its own connection (a dashboard asks a few times a minute, not a hot path).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from admin_ui.errors import QueueServerRefused, QueueServerUnavailable
from admin_ui.settings import AdminSettings
from queue_server.client import QueueClient
from queue_server.protocol.client_errors import ConnectionLost, OfflineError, QueueServerError

T = TypeVar("T")
# A dashboard page must not hang on a dead queue server: one pass over the list, short waits.
CONNECT_TIMEOUT_S = 1.0
REPLY_TIMEOUT_S = 5.0


@contextmanager
def queue_client(settings: AdminSettings, door: str = "dashboard") -> Iterator[QueueClient]:
    """A connected client; QueueServerUnavailable (503) when none is configured or reachable.
    `door`: its CLIENT NAME (the queue server counts RETRY and DELETE per door)."""
    if not settings.queue_servers:
        raise QueueServerUnavailable("no queue server configured ([queue_server] listen or servers)")
    client = QueueClient(list(settings.queue_servers), token=settings.queue_token,
                         timeout_s=REPLY_TIMEOUT_S, connect_timeout_s=CONNECT_TIMEOUT_S,
                         reconnect_attempts=0, name=door)
    try:
        yield client
    finally:
        client.close()


def ask(settings: AdminSettings, request: Callable[[QueueClient], T], *, door: str = "dashboard") -> T:
    """`request(client)` on a fresh connection; a refusal or an outage becomes one AdminError."""
    where = ", ".join(settings.queue_servers) or "no queue server"
    try:
        with queue_client(settings, door) as client:
            return request(client)
    except ConnectionLost as exc:  # also ServerUnreachable and ReplyTimeout
        raise QueueServerUnavailable(str(exc)) from exc
    except OfflineError as exc:
        raise QueueServerUnavailable(f"queue server {where} answered {exc}") from exc
    except QueueServerError as exc:
        raise QueueServerRefused(f"queue server {where} answered {exc}") from exc
