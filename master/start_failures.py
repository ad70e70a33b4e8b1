"""Why a queue's slots do not come up on this host (pure): the last setup() error of each queue
(from its slots' setup-error notes, slot/setup_notes.py) and the handler modules that failed
to import, with when and how many times, in every report (`start_failures`). The manager turns
each distinct error into one `handler_start_failed` event and shows the standing ones on the
Hosts page and in `slotmap hosts` (manager/events/start_failures.py).

Bounded: one entry per queue or handler source, the error's head and the traceback's tail
(slot/setup_notes.py), and only the MAX_REPORTED most recent in a report (about 2 KB each,
within the report's 64 KiB allowance beside its slots). A queue's entry goes when one of its
slots reaches its job loop; an import failure stands until the master restarts (a code reload
that fails to import is the report's `code_reload_failure`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from config.bounded import MAX_NAME_CHARS, Count, Name, QueueName, Seconds, UnixTime
from config.frames import Frame
from slot.setup_notes import MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS, SetupError, head, tail

MAX_REPORTED = 8


class StartFailure(Frame):
    """One queue's (or handler module's) last start error, as reported to the manager. Every
    field bounded (config/bounded.py): the manager takes these from any peer."""

    # "setup": a slot's setup() raised; "import": a handler module failed to import.
    kind: Literal["setup", "import"]
    # The queue whose slots fail (None for an import: which queues the module had is unknown).
    queue: QueueName | None = None
    # "setup() of app.Thumbs" or "module app.thumbs".
    source: Name
    error: str = Field(max_length=MAX_ERROR_CHARS)
    traceback: str = Field(default="", max_length=MAX_TRACEBACK_CHARS)
    # When this error (the same text) was first and last seen, and how many times since first.
    first_at_unix: UnixTime
    last_at_unix: UnixTime
    count: Count = Field(ge=1)
    # How long until the queue's next fork (its back-off, master/backoff.py); None for an import.
    retry_in_s: Seconds | None = None


@dataclass(frozen=True, slots=True)
class SetupFailed:
    """A slot's setup-error note (read from its lease pipe, master/leases.py)."""

    error: SetupError


@dataclass(slots=True)
class StartFailures:
    # queue -> its last setup() failure; handler source -> its import failure
    _setup: dict[str, StartFailure] = field(default_factory=dict)
    _imports: dict[str, StartFailure] = field(default_factory=dict)

    def setup_failed(self, queue: str, error: SetupError, at_unix: float) -> StartFailure:
        """A slot of `queue` said its setup() raised. The same error again counts; another
        error starts a new count (the manager tells each distinct one once)."""
        before = self._setup.get(queue)
        if before is not None and before.error == error.error:
            failure = replace_failure(before, last_at_unix=at_unix, count=before.count + 1,
                                      traceback=error.traceback)
        else:
            failure = StartFailure(kind="setup", queue=queue, source=head(f"setup() of {error.handler}", MAX_NAME_CHARS),
                                   error=error.error, traceback=error.traceback,
                                   first_at_unix=at_unix, last_at_unix=at_unix, count=1)
        self._setup[queue] = failure
        return failure

    def started(self, queue: str) -> None:
        """A slot of `queue` reached its job loop: its setup() works now."""
        self._setup.pop(queue, None)

    def imports_failed(self, failures: Mapping[str, str], tracebacks: Mapping[str, str],
                       at_unix: float) -> None:
        """The preload's import failures: handler source -> error, and -> its traceback's tail."""
        self._imports = {
            source: StartFailure(kind="import", source=head(source, MAX_NAME_CHARS),
                                 error=head(error, MAX_ERROR_CHARS),
                                 traceback=tail(tracebacks.get(source, ""), MAX_TRACEBACK_CHARS),
                                 first_at_unix=at_unix, last_at_unix=at_unix, count=1)
            for source, error in failures.items()
        }

    def failing(self, queue: str) -> bool:
        return queue in self._setup

    def queues(self) -> list[str]:
        """The queues whose last start failed."""
        return list(self._setup)

    def reported(self, retry_in_s: Mapping[str, float]) -> list[StartFailure]:
        """The MAX_REPORTED most recent, newest first; `retry_in_s`: queue -> its back-off left."""
        setup = [replace_failure(f, retry_in_s=round(retry_in_s.get(queue, 0.0), 3))
                 for queue, f in self._setup.items()]
        every = sorted([*setup, *self._imports.values()], key=lambda f: f.last_at_unix, reverse=True)
        return every[:MAX_REPORTED]


def replace_failure(failure: StartFailure, **changes: object) -> StartFailure:
    return failure.model_copy(update=changes)

