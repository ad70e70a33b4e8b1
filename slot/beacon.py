"""The messages between a slot and its master: Beacon and LeaseNote (slot -> master), Assignment
(master -> slot).

The slot is the lower layer, so it owns both formats; the master imports them.
Frames are compact JSON validated by pydantic: one `encode()` and one `decode()` each.
"""
from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum, auto

from pydantic import Field

from config.bounded import Count, Pid, QueueName, Seconds, SlotNumber, Text
from config.frames import Frame
from queue_server.protocol.retry import RetryPolicy
from slot.errors import MessageError


class SlotPhase(StrEnum):
    # Forked, handler not set up yet.
    STARTING = auto()
    # Waiting for jobs (blocked in GETB).
    IDLE = auto()
    # Running a batch.
    BUSY = auto()
    # Asked to stop: finishing the current batch.
    DRAINING = auto()
    # The last beacon: the slot is about to exit (see `exit_reason`).
    EXITING = auto()


class _Frame(Frame):
    DECODE_ERROR = MessageError


class Beacon(_Frame):
    """What a slot tells its master every beacon interval. Counters are totals since the fork."""

    slot_id: SlotNumber
    pid: Pid
    seq: Count
    phase: SlotPhase
    # Bounded like every field: the master relays these figures to the manager in its report.
    queue: QueueName | None
    jobs_done: Count = 0
    jobs_later: Count = 0
    batches: Count = 0
    # Jobs failed (job.fail() or unresolved when handle() raised), and of them those that
    # came back dead (no attempt left).
    jobs_failed: Count = 0
    jobs_dead: Count = 0
    # Batches whose handler (or a before_batch hook) raised.
    errors: Count = 0
    busy_s: Seconds = 0.0
    # How long the batch in progress has been running (0 when not busy): the master
    # kills a slot whose batch outlives its handler's batch_timeout_s.
    batch_age_s: Seconds = 0.0
    pss_bytes: Count = 0
    private_dirty_bytes: Count = 0
    exit_reason: Text | None = None


class Assignment(_Frame):
    """The queue a slot works on and its knobs; sent at fork and on every retarget."""

    queue: str = Field(pattern=r"^[A-Za-z0-9_]{1,128}$")
    batch_size: int = Field(ge=1)
    lock_timeout_s: float = Field(gt=0)
    private_dirty_limit_bytes: int = Field(ge=1)
    # The queue's retry policy, for a handler class that overrides part of it (None: the
    # policy's default). The slot applies it only then; otherwise the queue server does.
    max_attempts: int | None = Field(default=None, ge=1)
    retry_base_s: float | None = Field(default=None, ge=0)
    retry_max_s: float | None = Field(default=None, ge=0)
    # The handler's batch_timeout_s (None: no limit): the master kills a slot whose batch
    # runs longer (the slot renews its lock meanwhile, so the lock time is no limit).
    batch_timeout_s: float | None = Field(default=None, gt=0)
    # The queue server's max_job_bytes: a result longer than the server reads in one block
    # is not sent (DONE <id> LARGE <n>, logged: the finished job says how long it was); a
    # shorter one over the queue's max_result_bytes is sent, and the server says the same.
    max_result_bytes: int = Field(default=1024 * 1024, ge=0)
    # The queue's recycling after jobs or an age (0: none), each plus a jitter the slot draws
    # once at its start (slot/recycling.py; config/recycling.py says why it is absolute).
    max_jobs_per_slot: int = Field(default=0, ge=0)
    max_jobs_per_slot_jitter: int = Field(default=0, ge=0)
    max_slot_age_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    max_slot_age_jitter_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)

    def retry_policy(self) -> RetryPolicy:
        """The queue's retry policy as the config gave it to the master."""
        defaults = RetryPolicy()
        return RetryPolicy(
            max_attempts=defaults.max_attempts if self.max_attempts is None else self.max_attempts,
            retry_base_s=defaults.retry_base_s if self.retry_base_s is None else self.retry_base_s,
            retry_max_s=defaults.retry_max_s if self.retry_max_s is None else self.retry_max_s,
        )


class LeaseNote(_Frame):
    """The jobs a slot holds, sent to its master before the handler runs (slot/leases.py);
    `jobs` empty: the batch is acknowledged, nothing held. One JSON line on the slot's pipe."""

    slot_id: int = Field(ge=0)
    pid: int = Field(ge=1)
    # The lock length the batch was fetched with: the master renews it every third of it.
    lock_s: float = Field(default=0.0, ge=0)
    # (lease id, attempt) per job; attempt None from a server that does not count them.
    jobs: list[tuple[int, int | None]] = Field(default_factory=list)
    # Each job's key, in the order of `jobs` (empty from older slots): the master names the
    # job a crash is blamed on.
    keys: list[str | None] = Field(default_factory=list)
    # The handler runs the jobs one by one in this order (the default handle(): handle_job
    # per job), so a death names the first job without an outcome.
    in_order: bool = False

    @staticmethod
    def encode_held(slot_id: int, pid: int, lock_s: float, jobs: Sequence[tuple[int, int | None]],
                    keys: Sequence[str | None] = (), in_order: bool = False) -> bytes:
        """The same JSON as LeaseNote(...).encode(), built directly: it is written twice per
        batch, and pydantic's model build and dump took twice as long (28 against 16 us for a
        batch of 10, measured on the loaded 2-core test machine). Keys need no escaping: the
        queue server allows only [A-Za-z0-9_.:-] in them."""
        held = b",".join(b"[%d,%s]" % (job_id, b"null" if attempt is None else b"%d" % attempt)
                         for job_id, attempt in jobs)
        if keys and None not in keys:  # one join, not a format per key: this is per batch
            named = b'"' + '","'.join(keys).encode() + b'"'  # type: ignore[arg-type]
        else:
            named = b",".join(b"null" if key is None else b'"%s"' % key.encode() for key in keys)
        return b'{"slot_id":%d,"pid":%d,"lock_s":%r,"jobs":[%s],"keys":[%s],"in_order":%s}' % (
            slot_id, pid, float(lock_s), held, named, b"true" if in_order else b"false")

