"""Test handler module: a handler that print()s, as the guide's Notify does."""
from __future__ import annotations

from slot.handler import Handler, SlotJob, handler


@handler("printing")
class Printing(Handler):
    def handle_job(self, job: SlotJob) -> None:
        print("printed by the handler for", job.key)  # no flush: what handlers write
