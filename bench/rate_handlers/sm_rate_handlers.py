"""Handlers of bench/rate_limit.py and its test (bench/rate_handlers/ is their python_path): each job is one call to the outside API at
$SM_OUTSIDE_API, which answers 429 above its rate.

- `calls_paced`: the handler API as documented: one permit per job, taken as the loop
  reaches it; slow_down() on a 429 (and the job again in a second), ok() otherwise.
- `calls_batch_permits`: the behaviour before per-job pacing: the permits of the whole
  batch first, then the calls back to back.
- `calls_paced_1`, `_5`, `_20`: `calls_paced` for batch sizes run side by side in one
  cluster, each calling its own API at $SM_OUTSIDE_API_<QUEUE> when that is set.
"""
from __future__ import annotations

import http.client
import os
import urllib.parse
from collections.abc import Sequence

from slot.handler import Handler, SlotJob, handler

RETRY_AFTER_429_S = 1.0


class OutsideApi:
    """One kept-alive HTTP connection to $SM_OUTSIDE_API (made again after a failure)."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = parts.path or "/"
        self.connection: http.client.HTTPConnection | None = None

    def post(self, data: bytes) -> int:
        """POST the job's data; the HTTP status."""
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
            try:
                self.connection.request("POST", self.path, body=data)
                response = self.connection.getresponse()
                response.read()
                return response.status
            except (OSError, http.client.HTTPException):
                self.connection.close()
                self.connection = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


class _Caller(Handler):
    def setup(self) -> None:
        own = os.environ.get(f"SM_OUTSIDE_API_{self.queue.upper()}")
        self.api = OutsideApi(own or os.environ["SM_OUTSIDE_API"])

    def call(self, job: SlotJob) -> None:
        if self.api.post(job.data) == 429:
            self.limiter.slow_down()
            job.later(delay=RETRY_AFTER_429_S)
        else:
            self.limiter.ok()


@handler("calls_paced")
class PacedCalls(_Caller):
    def handle(self, jobs: Sequence[SlotJob]) -> None:
        for job in jobs:  # each job waits for its permit here
            self.call(job)


@handler("calls_batch_permits")
class BatchPermitCalls(_Caller):
    permits_per_job = False

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        self.limiter.acquire(len(jobs))
        for job in jobs:
            self.call(job)


@handler("calls_paced_1")
class PacedCalls1(PacedCalls):
    pass


@handler("calls_paced_5")
class PacedCalls5(PacedCalls):
    pass


@handler("calls_paced_20")
class PacedCalls20(PacedCalls):
    pass
