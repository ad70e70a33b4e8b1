"""Test handler module: 200 MB allocated and written at import, before the master forks."""
from __future__ import annotations

from collections.abc import Sequence

from slot.handler import Handler, SlotJob, handler

PRELOADED_BYTES = 200 * 1024 * 1024
# b"\x01" * n writes every page (a zero-filled bytearray would stay unbacked).
PRELOADED = b"\x01" * PRELOADED_BYTES


@handler("preloaded")
class Preloaded(Handler):
    def handle(self, jobs: Sequence[SlotJob]) -> None:
        for job in jobs:
            # Reading the shared data must not copy it.
            if job.item is not None:
                job.reply(b"%d" % PRELOADED[int(job.data)])
