"""What the client library returns about keyed jobs: JOB/JOBS entries, PUT and FAIL outcomes.

Light to import (pydantic and the standard library only): the dashboard, the CLI and
the slot use these without loading the clients.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

SUMMARY_CHARS = 200
JobState = Literal["ready", "delayed", "failed", "running", "dead", "done"]
JOB_STATES: tuple[JobState, ...] = ("ready", "delayed", "failed", "running", "dead", "done")
# What a unique PUT finds when its key is taken (`200 OK KEY <key> EXISTS <state>`).
ExistingState = Literal["ready", "delayed", "failed", "running"]
DeleteOutcome = Literal["ok", "not_found", "running"]


class JobError(BaseModel):
    """One failed attempt of a job: when, which attempt, its error (JOB ... ERRORS)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    at: float  # unix time
    attempt: int  # the run that failed (1 = the first)
    error: str


class JobInfo(BaseModel):
    """One job as JOB and JOBS describe it (docs/PROTOCOL.md Part B, "Job JSON")."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    key: str
    queue: str
    state: JobState
    priority: int
    attempts: int
    error: str | None = None
    failed_at: float | None = None  # unix time of the last failure
    next_run_at: float | None = None  # unix time: delayed and failed jobs
    died_at: float | None = None  # unix time: dead jobs
    lease_id: int | None = None  # the running id: running jobs
    expires_at: float | None = None  # unix time: a job put with a TTL, deleted then unless taken
    item: str | None = None
    data_len: int
    data: str  # UTF-8, invalid bytes replaced; JOBS cuts it at 1 KiB
    data_truncated: bool = False
    trace: str | None = None  # the W3C traceparent it was put with (PUT ... TRACE)
    # The errors of its last failed attempts, oldest first: only when asked (JOB ... ERRORS).
    errors: list[JobError] | None = None
    # Running and done jobs: when it was handed out (None: by a record logged before issue 26).
    started_at: float | None = None
    # Running jobs: the CLIENT NAME of the connection it was handed to (None: unnamed), and
    # the host and slot id when that name is a slot's `slot.<host>.<slot id>`.
    running_by: str | None = None
    running_host: str | None = None
    running_slot: int | None = None
    # Done jobs (kept for keep_done_s, at most keep_done_max per queue):
    done_at: float | None = None
    runtime_s: float | None = None
    ran_by: str | None = None  # the CLIENT NAME of the connection that finished it
    result: str | None = None  # what DONE ... RESULT gave (UTF-8, invalid bytes replaced)
    result_len: int | None = None
    result_kept: bool = True  # False: its result was over max_result_bytes (result_len says how large)
    result_truncated: bool = False  # JOBS cuts it at 1 KiB


@dataclass(frozen=True, slots=True)
class PutResult:
    """A PUT's outcome: the job's key, its item (with new_item=True), and for a unique
    PUT whose key was taken, the state of the job that holds it (no job was added) and,
    when that job is in another queue than the PUT's, its queue (keys are global)."""

    key: str
    item: str | None = None
    existing_state: ExistingState | None = None
    existing_queue: str | None = None

    @property
    def created(self) -> bool:
        return self.existing_state is None


@dataclass(frozen=True, slots=True)
class FailResult:
    """A FAIL's outcome: dead, or retried at `next_run_at` (unix time)."""

    dead: bool
    next_run_at: float | None = None


def error_summary(error: str | None) -> str | None:
    """The line that says what went wrong: a traceback's last line ('ValueError: bad photo')."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    if not lines:
        return None
    line = lines[-1]
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "\u2026"
