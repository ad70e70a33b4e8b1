"""Slots: worker processes that batch-fetch jobs of one queue, run its handler and acknowledge."""
from slot.handler import Handler, SlotJob, handler

__all__ = ["Handler", "SlotJob", "handler"]
