"""The queue server as a JobSource for the slot loop, over the blocking QueueClient."""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from queue_server.client import QueueClient
from queue_server.protocol.client_errors import (
    ConnectionLost,
    OfflineError,
    QueueServerError,
    WaitWoken,
)
from queue_server.protocol.replies import Job
from slot.loop import SourceUnavailable
from slot.outcomes import Failure
from slot.wake import Waker

T = TypeVar("T")
log = logging.getLogger(__name__)
BAD_REQUEST = 400


class ClientSource:
    def __init__(self, client: QueueClient, waker: Waker) -> None:
        self.client = client
        self.waker = waker
        # Off after a queue server refused KEYS (one older than issue 9, during an upgrade).
        self.keys = True

    def fetch(self, queue: str, *, count: int, lock_s: float) -> Sequence[Job] | None:
        """GETB q COUNT n EXPIRE lock KEYS: waits in the server (no polling) until a job is
        ready. KEYS gives each job's key and attempt, and makes its lease a managed one (an
        expiry counts as a failed attempt).

        None when the waker ends the wait (a stop, a retarget): the connection is dropped so
        the server hands the waiter nothing, and a reply that came with the wake is kept.
        """
        if self.waker.woken():
            return None
        try:
            return self.client.get(queue, count=count, expire_s=lock_s, block=True,
                                   keys=self.keys, wake_fd=self.waker.fd)
        except WaitWoken:
            self.waker.drain()
            return None
        except (ConnectionLost, OfflineError, OSError) as exc:
            raise SourceUnavailable(str(exc)) from exc
        except QueueServerError as exc:
            if self.keys and exc.code == BAD_REQUEST:
                self.keys = False
                log.warning("the queue server refused GETB ... KEYS (%s): an older server; jobs "
                            "run without keys and attempts, failed jobs wait for their lock time",
                            exc)
                raise SourceUnavailable(f"server refused KEYS: {exc}") from exc
            raise SourceUnavailable(f"server refused GETB: {exc}") from exc

    def done(self, ids: Sequence[int]) -> None:
        _call(self.client.done, *ids)

    def later(self, ids: Sequence[int], *, delay_s: float | None, front: bool = False) -> None:
        if not front:
            _call(self.client.later, *ids, delay_s=delay_s)
            return
        try:
            self.client.later(*ids, delay_s=delay_s, front=True)
        except QueueServerError as exc:
            if exc.code != BAD_REQUEST:
                raise _unavailable(exc) from exc
            # Refused, the jobs would wait for their lock and be charged an attempt.
            log.warning("the queue server refused LATER ... FRONT (%s): an older server; the %d "
                        "jobs given back go to the end of their queue instead", exc, len(ids))
            _call(self.client.later, *ids, delay_s=delay_s)
        except OSError as exc:
            raise _unavailable(exc) from exc

    def fail(self, failures: Sequence[Failure]) -> int:
        """The FAILs pipelined: one round trip for the batch's failed jobs."""
        results = _call(self.client.fail_many, failures)
        for one, result in zip(failures, results, strict=True):
            if result is None:
                # Its lock expired meanwhile: the server counted that as the failure already.
                log.warning("FAIL %d: the job was no longer running (lock expired?)", one.id)
        return sum(result is not None and result.dead for result in results)

    def reply(self, queue: str, replies: Sequence[tuple[str, bytes]], *,
              ttl_s: float | None = None) -> None:
        """Each reply under its caller's item; with `ttl_s`, deleted if not taken by then."""
        for item, data in replies:
            _call(self.client.put, queue, data, item=item, ttl_s=ttl_s)


def _call(request: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return request(*args, **kwargs)
    except (QueueServerError, OSError) as exc:
        raise _unavailable(exc) from exc


def _unavailable(exc: QueueServerError | OSError) -> SourceUnavailable:
    if isinstance(exc, ConnectionLost | OfflineError | OSError):
        return SourceUnavailable(str(exc))
    # A refused acknowledgement is no reason to stop the slot: the jobs keep their lock.
    return SourceUnavailable(f"server refused: {exc}")
