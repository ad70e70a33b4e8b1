"""The queue server as a JobSource for the slot loop, over the blocking QueueClient."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from queue_server.client import QueueClient
from queue_server.client_errors import ConnectionLost, OfflineError, QueueServerError
from queue_server.replies import Job
from slot.loop import SourceUnavailable
from slot.wake import Waker, Woken


class ClientSource:
    def __init__(self, client: QueueClient, waker: Waker) -> None:
        self.client = client
        self.waker = waker

    def fetch(self, queue: str, *, count: int, lock_s: float) -> Sequence[Job] | None:
        """GETB q COUNT n EXPIRE lock: waits in the server (no polling) until a job is ready."""
        try:
            with self.waker.waiting():
                return self.client.get(queue, count=count, expire_s=lock_s, block=True)
        except Woken:
            return None
        except (ConnectionLost, OfflineError, OSError) as exc:
            raise SourceUnavailable(str(exc)) from exc
        except QueueServerError as exc:
            raise SourceUnavailable(f"server refused GETB: {exc}") from exc

    def done(self, ids: Sequence[int]) -> None:
        _call(self.client.done, *ids)

    def later(self, ids: Sequence[int], *, delay_s: float | None) -> None:
        _call(self.client.later, *ids, delay_s=delay_s)

    def reply(self, queue: str, replies: Sequence[tuple[str, bytes]]) -> None:
        for item, data in replies:
            _call(self.client.put, queue, data, item=item)


def _call(request: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    try:
        request(*args, **kwargs)
    except (ConnectionLost, OfflineError, OSError) as exc:
        raise SourceUnavailable(str(exc)) from exc
    except QueueServerError as exc:
        # A refused acknowledgement is no reason to stop the slot: the jobs keep their lock.
        raise SourceUnavailable(f"server refused: {exc}") from exc
