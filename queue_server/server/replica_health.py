"""A replica's failures to follow its primary: counted, kept for INFO, and described
without job data (a record may carry a secret in its block; logs never show data)."""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

log = logging.getLogger("slotmap.queue_server")

# The last error is shown as is in INFO: bounded, whatever the primary sent.
MAX_ERROR_CHARS = 500
# A primary whose stream keeps failing here is asked again less and less often (each try
# costs it a full snapshot), up to this.
MAX_RETRY_S = 30.0


@dataclass
class ReplicationHealth:
    errors: int = 0  # records or snapshots from the primary this server could not apply
    resyncs: int = 0  # full snapshots applied after the first
    last_error: str | None = None
    last_error_at: float | None = None  # unix time
    _snapshots: int = 0
    _in_a_row: int = 0  # links that failed with no good link or unreachable primary between
    _failed_since_retry: bool = False

    def failed(self, why: str) -> None:
        self.errors += 1
        self.last_error = why[:MAX_ERROR_CHARS]
        self.last_error_at = time.time()
        self._in_a_row += 1
        self._failed_since_retry = True

    def retry_delay(self, base_s: float) -> float:
        """How long the follower waits before its next link: `base_s`, or after links that
        failed in a row base_s, 2 base_s, 4 base_s ... up to MAX_RETRY_S. A link that ended
        any other way (lost, the primary away) starts the count again."""
        if not self._failed_since_retry:
            self._in_a_row = 0
        self._failed_since_retry = False
        delay = min(base_s * 2 ** max(self._in_a_row - 1, 0), MAX_RETRY_S)
        if self._in_a_row > 1:
            log.error("replication: %d tries in a row failed to apply; next try in %.1f s",
                      self._in_a_row, delay)
        return delay

    def snapshot_applied(self) -> None:
        if self._snapshots:
            self.resyncs += 1
        self._snapshots += 1

    def as_json(self) -> dict[str, object]:
        return {"replication_errors": self.errors, "replication_resyncs": self.resyncs,
                "last_replication_error": self.last_error,
                "last_replication_error_at": self.last_error_at}


def describe(record: object) -> str:
    """A SYNC record's kind and fields, its data block shown by length only."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        return repr(record)[:MAX_ERROR_CHARS]
    fields = []
    for item in dataclasses.fields(record):
        value = getattr(record, item.name)
        shown = f"<{len(value)} bytes>" if item.name == "data" else repr(value)
        fields.append(f"{item.name}={shown}")
    return f"{type(record).__name__}({', '.join(fields)})"[:MAX_ERROR_CHARS]


def applied(reply: bytes) -> bool:
    """Every line of a record's reply is a success: a 404 means the replica's state is not
    the primary's (the primary logs a record only for what it did)."""
    return all(line.startswith(b"200") for line in reply.split(b"\r\n") if line)
