"""Why a queue's slots do not come up on a host, as the Hosts page and /api/slotmap show it: the
host sample's short form (manager/storage/samples.py); the traceback is in the failure's
`handler_start_failed` event, linked from the page."""
from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from manager.storage.samples import read_start_failures

log = logging.getLogger(__name__)


class StartFailureView(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["setup", "import"]
    queue: str | None = Field(description="None for a handler module that failed to import")
    source: str
    error: str
    count: int
    first_at_unix: float
    last_at_unix: float
    retry_at_unix: float | None = Field(description="the queue's next fork after its back-off")


def start_failure_views(stored: str | None) -> list[StartFailureView]:
    """The sample's column as views; a row that does not fit the view is left out (a sample
    written by another release), not shown half."""
    views: list[StartFailureView] = []
    for row in read_start_failures(stored):
        try:
            views.append(StartFailureView.model_validate(row))
        except ValidationError as exc:  # written by another release: the host's events still tell it
            log.warning("a stored start failure the page cannot show (left out): %s", exc)
    return views
