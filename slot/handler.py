"""The handler API: `@handler("queue") class X(Handler)` and the jobs a handler receives."""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum, auto
from typing import Any, ClassVar, Protocol, TypeVar

from slot.errors import HandlerRegistrationError, JobResolutionError

QUEUE_NAME = re.compile(r"[A-Za-z0-9_]{1,128}")


class Outcome(StrEnum):
    # Nothing said: the job is DONE when handle() returns normally.
    DONE = auto()
    LATER = auto()


class QueueJob(Protocol):
    """What the queue client hands out (queue_server.replies.Job satisfies it)."""

    @property
    def queue(self) -> str: ...
    @property
    def id(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def data(self) -> bytes: ...
    @property
    def item(self) -> str | None: ...


@dataclass(slots=True, eq=False)
class SlotJob:
    """One job of a batch. The handler may postpone it or answer it; otherwise it is DONE."""

    queue: str
    id: int
    priority: int
    data: bytes
    item: str | None
    outcome: Outcome = Outcome.DONE
    delay_s: float | None = None
    reply_data: bytes | None = None
    _resolved: bool = field(default=False, repr=False)

    @classmethod
    def from_job(cls, job: QueueJob) -> SlotJob:
        return cls(job.queue, job.id, job.priority, job.data, job.item)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")

    def json(self) -> Any:
        """The data parsed as JSON (raises ValueError on bad data, like json.loads)."""
        return json.loads(self.data)

    def later(self, delay: float | None = None, *, delay_s: float | None = None) -> None:
        """Put the job back (at the end of its priority), visible again after `delay` seconds.

        `delay` is the documented handler API (`job.later(delay=30)`); `delay_s` is the
        same in the units-in-names spelling of the client library.
        """
        if delay is not None and delay_s is not None:
            raise TypeError("give delay or delay_s, not both")
        self._resolve()
        self.outcome = Outcome.LATER
        self.delay_s = delay if delay is not None else delay_s

    def reply(self, data: bytes | str) -> None:
        """Answer a synchronous call (PUT ... WAIT): the reply job goes to the output queue
        with this job's item; the job itself is DONE."""
        if self.item is None:
            raise JobResolutionError(
                f"job {self.id} of queue {self.queue} has no item, so no caller waits for a reply"
            )
        self._resolve()
        self.reply_data = data.encode("utf-8") if isinstance(data, str) else data

    def reply_json(self, value: Any) -> None:
        self.reply(json.dumps(value, separators=(",", ":")))

    def _resolve(self) -> None:
        if self._resolved:
            raise JobResolutionError(f"job {self.id} of queue {self.queue} is already resolved")
        self._resolved = True


class Handler:
    """Base class of queue handlers. One instance per slot, created after the fork.

    Subclasses set `batch_size` (the queue config's batch_size wins when given) and
    override `handle`; `setup`/`teardown` bracket the instance's life in the slot.
    """

    queue: ClassVar[str] = ""
    batch_size: ClassVar[int] = 10
    # Where reply() puts answers; None means "<queue>_reply".
    reply_queue: ClassVar[str | None] = None

    def setup(self) -> None:
        """Open connections and warm caches: runs once per slot, after the fork."""

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        raise NotImplementedError(f"{type(self).__qualname__} must define handle(jobs)")

    def teardown(self) -> None:
        """Close what setup() opened: runs when the slot stops or switches queue."""

    @classmethod
    def output_queue(cls) -> str:
        return cls.reply_queue or f"{cls.queue}_reply"


H = TypeVar("H", bound=type[Handler])

_REGISTRY: dict[str, type[Handler]] = {}


def handler(queue: str) -> Callable[[H], H]:
    """Class decorator: register the class as the handler of `queue`."""
    if not QUEUE_NAME.fullmatch(queue):
        raise HandlerRegistrationError(f"queue name {queue!r} must match [A-Za-z0-9_]{{1,128}}")

    def register(cls: H) -> H:
        if not (isinstance(cls, type) and issubclass(cls, Handler)):
            raise HandlerRegistrationError(f"@handler({queue!r}) must decorate a Handler subclass")
        taken = _REGISTRY.get(queue)
        if taken is not None and _qualified_name(taken) != _qualified_name(cls):
            raise HandlerRegistrationError(
                f"queue {queue!r} already has handler {_qualified_name(taken)}; "
                f"{_qualified_name(cls)} cannot take it too"
            )
        cls.queue = queue
        # Re-importing the same module (tests, reloads) replaces the class with itself.
        _REGISTRY[queue] = cls
        return cls

    return register


def registered_handlers() -> Mapping[str, type[Handler]]:
    """Queue name -> handler class, for every class registered so far in this process."""
    return dict(_REGISTRY)


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
