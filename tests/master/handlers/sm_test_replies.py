"""Test handler module: a handler whose slot dies right after it sent its replies' PUTs,
before its DONE (the moment a kill during the acknowledgement hits, slot/loop.py
_acknowledge). The master then settles the batch from the slot's REPLY notes and sends the
replies again (master/settle.py): they must name the keys the slot's PUTs named."""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from slot.handler import Handler, SlotJob, handler
from slot.source import ClientSource


def _die_after_reply() -> None:
    """In this slot process only (setup() runs after the fork): the next reply sent is
    the slot's last act."""
    send = ClientSource.reply

    def reply_then_exit(self: ClientSource, queue: str, replies: Sequence[Any], **kwargs: Any) -> None:
        send(self, queue, replies, **kwargs)
        os._exit(9)

    ClientSource.reply = reply_then_exit  # type: ignore[method-assign]


@handler("reply_then_exit")
class ReplyThenExit(Handler):
    def setup(self) -> None:
        _die_after_reply()

    def handle_job(self, job: SlotJob) -> None:
        job.reply(b"answer to " + job.data)
