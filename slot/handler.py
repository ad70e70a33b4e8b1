"""The handler API: `@handler("queue") class X(Handler)` and the jobs a handler receives."""
from __future__ import annotations

import json
import logging
import re
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum, auto
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from slot.errors import HandlerRegistrationError, JobResolutionError

if TYPE_CHECKING:
    from slot.limiter import SlotLimiter

log = logging.getLogger(__name__)

QUEUE_NAME = re.compile(r"[A-Za-z0-9_]{1,128}")


# The queue server keeps at most 16 KiB of a job's error; the slot cuts it first so a
# handler that raises with a megabyte of message does not send it.
MAX_ERROR_CHARS = 16 * 1024


class Outcome(StrEnum):
    # Nothing said: the job is DONE when handle() returns normally.
    DONE = auto()
    LATER = auto()
    # job.fail(), or unresolved when handle() raised: back after a backoff, or dead.
    FAILED = auto()
    # Not started when a retarget came (slot/retarget.py): back at the head of its queue, in
    # the batch's order (LATER ... FRONT), no attempt charged. Set by the slot, not handlers.
    GIVEN_BACK = auto()


class QueueJob(Protocol):
    """What the queue client hands out (queue_server.protocol.replies.Job satisfies it)."""

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
    @property
    def key(self) -> str | None: ...
    @property
    def attempt(self) -> int | None: ...
    @property
    def trace(self) -> str | None: ...


@dataclass(slots=True, eq=False)
class SlotJob:
    """One job of a batch. The handler may finish, fail, postpone or answer it; a job left
    unresolved is DONE when handle() returns, and failed when handle() raises."""

    queue: str
    id: int
    priority: int
    data: bytes
    item: str | None
    # The job's stable key (survives hand-outs) and this run's number (1 on the first run);
    # None only from a queue server that does not give them.
    key: str | None = None
    attempt: int | None = None
    outcome: Outcome = Outcome.DONE
    delay_s: float | None = None
    reply_data: bytes | None = None
    error: str | None = None
    # fail(dead=True): no retry whatever the attempts left.
    give_up: bool = False
    # Failed with batch-mates by one exception (or crash): handed out alone next time, so a
    # poison job cannot keep failing its neighbours.
    solo: bool = False
    # The W3C traceparent its producer put it with (None: untraced, or no OpenTelemetry here).
    trace: str | None = None
    # What it returned (job.result(), or handle_job's return value): kept with the finished
    # job by the queue server (DONE ... RESULT), up to the queue's max_result_bytes.
    result_data: bytes | None = None
    _resolved: bool = field(default=False, repr=False)

    @classmethod
    def from_job(cls, job: QueueJob) -> SlotJob:
        return cls(job.queue, job.id, job.priority, job.data, job.item, job.key, job.attempt,
                   trace=job.trace)

    def span(self) -> AbstractContextManager[Any]:
        """The span `slotmap.job <queue>` continuing the producer's trace (handle() runs each
        handle_job() in it; a handler with its own handle() opens it per job); follow-up
        jobs put inside it carry it on. Nothing without OpenTelemetry."""
        from queue_server.client import tracing  # not loaded by the pulsar (as slot.producer)

        return tracing.job_span(self.queue, self.key, self.attempt, self.trace)

    @property
    def resolved(self) -> bool:
        return self._resolved

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
        self._told()

    def done(self) -> None:
        """Mark the job finished now: it stays DONE even if handle() raises afterwards, or the
        slot dies (the master learns it at once and acknowledges it then)."""
        self._resolve()
        self.outcome = Outcome.DONE
        self._told()

    def fail(self, reason: str | BaseException, *, dead: bool = False) -> None:
        """The job failed: it comes back after the retry policy's backoff (its attempt counted),
        or is dead once its attempts are used up, or at once with `dead=True`.

        `reason` is a text or an exception (stored as type, message and traceback).
        """
        self._resolve()
        self.outcome = Outcome.FAILED
        self.error = error_text(reason)
        self.give_up = dead
        self._told()

    def result(self, value: Any) -> None:
        """Keep `value` with the finished job (bytes as they are, str as UTF-8, anything else
        as JSON): `slotmap job`, the job page and `client.result(queue, key)` show it. Does
        not resolve the job: it is DONE when handle() returns, unless failed or postponed."""
        if isinstance(value, bytes | bytearray | memoryview):
            self.result_data = bytes(value)
        elif isinstance(value, str):
            self.result_data = value.encode("utf-8")
        else:
            self.result_data = json.dumps(value, separators=(",", ":"), default=str).encode("utf-8")

    def reply(self, data: bytes | str) -> None:
        """Answer a synchronous call (PUT ... WAIT): the reply job goes to the output queue
        with this job's item; the job itself is DONE."""
        if self.item is None:
            raise JobResolutionError(
                f"job {self.id} of queue {self.queue} has no item, so no caller waits for a reply"
            )
        self._resolve()
        self.reply_data = data.encode("utf-8") if isinstance(data, str) else data
        self._told()

    def reply_json(self, value: Any) -> None:
        self.reply(json.dumps(value, separators=(",", ":")))

    def _give_back(self) -> None:
        """For slot/retarget.py: the job was not started and goes back to the head of its
        queue. No outcome hook: the caller notes all the jobs it gives back in one write."""
        self._resolve()
        self.outcome = Outcome.GIVEN_BACK

    def _told(self) -> None:
        hook = _outcome_hook
        if hook is not None:
            hook(self)

    def _resolve(self) -> None:
        if self._resolved:
            raise JobResolutionError(f"job {self.id} of queue {self.queue} is already resolved")
        self._resolved = True


# Told of each outcome the moment it is decided (the slot's notes to its master,
# slot/outcome_notes.py), so a crash later in the batch does not undo it. One per process, set
# by the slot loop around each batch: one batch runs at a time in a slot, and a module
# global costs the all-good path nothing per job (a field set on each job did).
_outcome_hook: Callable[[SlotJob], None] | None = None


def set_outcome_hook(hook: Callable[[SlotJob], None] | None) -> None:
    global _outcome_hook
    _outcome_hook = hook


def error_text(reason: str | BaseException) -> str:
    """A failure as stored with the job: the text itself, or an exception's traceback
    (which ends with its type and message), cut in the middle past MAX_ERROR_CHARS."""
    if isinstance(reason, BaseException):
        text = "".join(traceback.format_exception(reason)).rstrip("\n")
    else:
        text = str(reason)
    if len(text) <= MAX_ERROR_CHARS:
        return text
    # The head says where it started, the tail what finally raised: keep both.
    head = MAX_ERROR_CHARS // 4
    tail = MAX_ERROR_CHARS - head - 64
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


class Handler:
    """Base class of queue handlers. One instance per slot, created after the fork.

    Subclasses set `batch_size` (the queue config's batch_size wins when given) and
    override `handle(jobs)` (the whole batch) or `handle_job(job)` (one at a time, an
    exception failing that job only); `setup`/`teardown` bracket the instance's life.
    """

    queue: ClassVar[str] = ""
    batch_size: ClassVar[int] = 10
    # Where reply() puts answers; None means "<queue>_reply".
    reply_queue: ClassVar[str | None] = None
    # A reply not taken within this many seconds is deleted by the queue server (PUT ...
    # TTL): its caller gave up or is gone, so nothing stays in the reply queue for good.
    # None: replies are kept until taken.
    reply_ttl_s: ClassVar[float | None] = 600.0
    # A queue with a rate_limit: True gives each job one permit when handle() reaches it
    # (calls paced at the rate); False leaves permits to the handler (self.limiter.acquire()).
    permits_per_job: ClassVar[bool] = True
    # The retry policy of this handler's failed jobs; None takes the queue's config
    # ([queues.<q>] max_attempts, retry_base_s, retry_max_s).
    max_attempts: ClassVar[int | None] = None
    retry_base_s: ClassVar[float | None] = None
    retry_max_s: ClassVar[float | None] = None
    # A batch running longer than this is taken as stuck: the master kills the slot and
    # fails the batch (its lock is renewed while the slot lives, so without this a loop
    # that never ends would hold its jobs forever). None: no limit.
    batch_timeout_s: ClassVar[float | None] = 7200.0
    # Set by the slot: where handle()'s loop tells the master which job runs (slot/done_map.py).
    _running: memoryview | None = None

    def setup(self) -> None:
        """Open connections and warm caches: runs once per slot, after the fork."""

    def handle(self, jobs: Sequence[SlotJob]) -> None:
        """The whole batch at once. By default: handle_job() for each job, an exception
        failing that job (with its traceback) and the others going on; a job whose
        handle_job() returned is DONE (even if the slot dies later in the batch: its master
        knows which job was running), with what it returned as its result."""
        running = self._running
        for job in jobs:
            if running is not None:
                running[0] = job.id  # one store into the page shared with the master
            try:
                with job.span():
                    returned = self.handle_job(job)
                if returned is not None and job.result_data is None:
                    job.result(returned)  # the handler's return value is the job's result
            except Exception as exc:  # one job's failure, recorded with the job
                if job.resolved:
                    log.warning("%s.handle_job raised after resolving job %s (%s); its outcome "
                                "stands", type(self).__qualname__, job.key or job.id,
                                job.outcome, exc_info=True)
                else:
                    job.fail(exc)

    def handle_job(self, job: SlotJob) -> Any:
        """One job; what it returns (not None) is kept as the job's result (job.result())."""
        raise NotImplementedError(
            f"{type(self).__qualname__} must define handle(jobs) or handle_job(job)"
        )

    def teardown(self) -> None:
        """Close what setup() opened: runs when the slot stops or switches queue."""

    @property
    def limiter(self) -> SlotLimiter:
        """The queue's cluster-wide rate limiter (named after the queue): `slow_down()` on a
        "too many requests", `pause(seconds)` on "stop for a while", `ok()` on success,
        `acquire()` when permits_per_job is False. See slot/permits.py."""
        from slot.limiter import limiter_for  # the pulsar's client only when a handler asks

        return limiter_for(self.queue)

    def put(self, queue: str, data: bytes | str, *, priority: int = 0, key: str | None = None,
            delay_s: float | None = None, ttl_s: float | None = None) -> str:
        """Put a follow-up job through this slot's connection; its key. Derive `key` from the
        job being handled (`f"{job.key}:notify"`) and a parent that fails and runs again puts
        no second child while the first waits or runs (docs/GUIDE.md, Follow-up jobs)."""
        from slot import producer  # not loaded by the pulsar, which imports this module's API

        return producer.put(queue, data, priority=priority, key=key, delay_s=delay_s, ttl_s=ttl_s)

    def put_many(self, queue: str, datas: Iterable[bytes | str], *, priority: int = 0,
                 keys: Sequence[str] | None = None) -> int:
        """Put several follow-up jobs (with `keys`, one key each); how many were taken."""
        from slot import producer

        return producer.put_many(queue, datas, priority=priority, keys=keys)

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


def replace_registry(handlers: Mapping[str, type[Handler]]) -> None:
    """For a code reload (master/code_reload.py): the registry as `handlers` says, so the new
    code's classes register afresh and a refused reload puts the old ones back."""
    _REGISTRY.clear()
    _REGISTRY.update(handlers)


def registered_handlers() -> Mapping[str, type[Handler]]:
    """Queue name -> handler class, for every class registered so far in this process."""
    return dict(_REGISTRY)


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
