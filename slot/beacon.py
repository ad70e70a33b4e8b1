"""The messages between a slot and its master: Beacon (slot -> master) and Assignment (master -> slot).

The slot is the lower layer, so it owns both formats; the master imports them.
Frames are compact JSON validated by pydantic: one `encode()` and one `decode()` each.
"""
from __future__ import annotations

from enum import StrEnum, auto
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def encode(self) -> bytes:
        return self.model_dump_json().encode()


class Beacon(_Frame):
    """What a slot tells its master every beacon interval. Counters are totals since the fork."""

    slot_id: int = Field(ge=0)
    pid: int = Field(ge=1)
    seq: int = Field(ge=0)
    phase: SlotPhase
    queue: str | None
    jobs_done: int = Field(default=0, ge=0)
    jobs_later: int = Field(default=0, ge=0)
    batches: int = Field(default=0, ge=0)
    # Batches whose handler raised (those jobs stay locked until their lock time).
    errors: int = Field(default=0, ge=0)
    busy_s: float = Field(default=0.0, ge=0)
    # How long the batch in progress has been running (0 when not busy): the master
    # kills a slot whose batch outlives the queue's lock time, as its jobs went elsewhere.
    batch_age_s: float = Field(default=0.0, ge=0)
    pss_bytes: int = Field(default=0, ge=0)
    private_dirty_bytes: int = Field(default=0, ge=0)
    exit_reason: str | None = None

    @classmethod
    def decode(cls, frame: bytes) -> Beacon:
        return _decode(cls, frame)


class Assignment(_Frame):
    """The queue a slot works on and its knobs; sent at fork and on every retarget."""

    queue: str = Field(pattern=r"^[A-Za-z0-9_]{1,128}$")
    batch_size: int = Field(ge=1)
    lock_timeout_s: float = Field(gt=0)
    private_dirty_limit_bytes: int = Field(ge=1)

    @classmethod
    def decode(cls, frame: bytes) -> Assignment:
        return _decode(cls, frame)


F = TypeVar("F", bound=_Frame)


def _decode(cls: type[F], frame: bytes) -> F:
    try:
        return cls.model_validate_json(frame)
    except ValidationError as exc:
        raise MessageError(f"bad {cls.__name__} frame ({len(frame)} bytes): {exc}") from exc
