"""The Jobs page's search and the failure groups as the API gives them (issue 26)."""
from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from admin_ui.schemas import JobState, JobView
from config.models import QUEUE_NAME_PATTERN
from queue_server.protocol.job_positions import POSITION_PATTERN
from queue_server.protocol.numbers import MAX_UNIX_TIME

MAX_SEARCH_LIMIT = 200
PREFIX_PATTERN = r"^[A-Za-z0-9_.:@-]{1,128}$"
ERROR_TYPE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.]{0,99}$"


class JobsSearchQuery(BaseModel):
    """What to look for; `from_queue`, `after` and `at` are the previous page's `next_queue`,
    `next_after` and `next_at`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    state: JobState = "dead"
    queue: Annotated[str | None, Field(pattern=QUEUE_NAME_PATTERN)] = None
    prefix: Annotated[str | None, Field(pattern=PREFIX_PATTERN, description="job keys starting with this")] = None
    error_type: Annotated[str | None, Field(
        pattern=ERROR_TYPE_PATTERN,
        description=("the last error's type, in any case: a traceback's last `Name:` (ValueError, or "
                     "valueerror), LockExpired, Cancelled, SlotCrashed or other"))] = None
    # Bounded as the queue server bounds them (an `inf` or 1e300 was a 500 there, not a 422 here).
    since: Annotated[float | None, Field(ge=0, le=MAX_UNIX_TIME, allow_inf_nan=False, description=(
        "unix time, inclusive, of the state's own time: died_at (dead), done_at (done), failed_at "
        "(failed), next_run_at (delayed), started_at (running); ready jobs have none"))] = None
    until: Annotated[float | None, Field(ge=0, le=MAX_UNIX_TIME, allow_inf_nan=False,
                                         description="unix time, exclusive; after since")] = None
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT)] = 50
    from_queue: Annotated[str | None, Field(pattern=QUEUE_NAME_PATTERN)] = None
    after: Annotated[str | None, Field(pattern=PREFIX_PATTERN)] = None
    at: Annotated[str | None, Field(pattern=POSITION_PATTERN)] = None  # after's position (next_at)

    @model_validator(mode="after")
    def _time_range_makes_sense(self) -> JobsSearchQuery:
        # Said here, whatever the queues hold: the queue server refuses a time on ready jobs only
        # when a queue has some, and a reversed range would quietly find nothing.
        if self.state == "ready" and (self.since is not None or self.until is not None):
            raise ValueError("ready jobs have no time to search by: leave since and until out")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError(f"since ({self.since:g}) must be before until ({self.until:g})")
        return self


class JobsSearchView(BaseModel):
    """One page of a search over every queue (or one)."""

    model_config = ConfigDict(frozen=True)
    query: JobsSearchQuery
    jobs: list[JobView]
    scanned: int = Field(description="jobs the queue server examined for this page")
    next_queue: str | None = Field(default=None, description="pass as from_queue for the next page")
    next_after: str | None = Field(default=None, description="pass as after for the next page")
    next_at: str | None = Field(default=None, description=(
        "pass as at for the next page: where next_after stood, so the search goes on past it "
        "even when that job left the state meanwhile"))
    cut_short: bool = Field(default=False, description=(
        "the page stopped at its bound of work on the queue server before it was full: the next "
        "page goes on searching"))


class FailureGroup(BaseModel):
    """Failed attempts of one queue of one error type, with the newest kept job of that type."""

    model_config = ConfigDict(frozen=True)
    queue: str
    error_type: str
    failed_attempts: int = Field(description="failed attempts of this type since the queue server started")
    sample: JobView | None = Field(description="the newest dead (else failed) job whose last error has this type")
    sampled: bool = Field(default=True, description=(
        "false: no sample was looked up (only the largest groups get one, to bound the work): "
        "a null sample then does not mean that no such job is kept"))
