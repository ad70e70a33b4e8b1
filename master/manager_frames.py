"""The master-manager link's wire format: the two frames and the schedule both ends share.

The master is the lower layer, so it owns these frames; they live apart from the master's
socket and arbiter (master/manager_link.py) so that the manager imports only this, the
host report and pydantic, not the master's or the slot's running machinery.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field, field_serializer

from config.bounded import MAX_QUEUES, MAX_SLOTS, Name, Pid, QueueName, SlotNumber
from config.frames import Frame
from config.models import QueueConfig
from master.report import HostReport

# The master's reconnect backoff, in heartbeat intervals: the manager uses the maximum to
# tell a master that is away (reconnecting) from one that is gone.
BACKOFF_INITIAL_INTERVALS = 1
BACKOFF_MAX_INTERVALS = 32
# [manager] max_message_bytes: the largest frame either end of the link accepts.
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024


class LinkFrameError(ValueError):
    """A manager-link frame that does not decode."""


class _Frame(Frame):
    DECODE_ERROR = LinkFrameError


class MasterFrame(_Frame):
    """Master -> manager, every heartbeat: the host report. `leaving` says goodbye."""

    report: HostReport
    leaving: bool = False


class ManagerFrame(_Frame):
    """Manager -> master, every heartbeat: this host's slots (slot number -> queue).

    None means "no plan for you yet: keep what you run"; the manager sends it until it
    has rebuilt its view of the host from the host's reports.
    """

    # Sent only when set: a master of the release before reads the rest.
    LATER_FIELDS = frozenset({"queues", "queues_version"})

    manager_pid: Pid
    slots: dict[SlotNumber, QueueName] | None = Field(default=None, max_length=MAX_SLOTS)
    # After a config reload on the manager: every queue's settings as the manager has them, and
    # their version, until the host's report says it runs that version (the master then gives
    # them to its slots, as a SIGHUP of an unmanaged master does). None: keep the master's own.
    queues: dict[QueueName, QueueConfig] | None = Field(default=None, max_length=MAX_QUEUES)
    queues_version: Name = ""

    @field_serializer("queues")
    def _queues_as_written(self, queues: dict[str, QueueConfig] | None) -> dict[str, Any] | None:
        # Only the keys the manager's file writes: a key written wins over the handler class's
        # (batch_size), so a default sent here would hide the class's on the master.
        if queues is None:
            return None
        return {name: queue.model_dump(mode="json", exclude_unset=True) for name, queue in queues.items()}
