"""Errors of the slot package: each says what went wrong and what happens next."""
from __future__ import annotations


class SlotError(Exception):
    """Base of the slot package's errors."""


class HandlerRegistrationError(SlotError):
    """A handler class cannot be registered (bad queue name, queue taken by another class)."""


class JobResolutionError(SlotError):
    """A handler resolved a job twice, or replied to a job that has no item."""


class MessageError(SlotError):
    """A ZeroMQ frame between master and slot that does not decode; the frame is dropped."""


class ProducerNotInstalled(SlotError):
    """A handler put a follow-up job where no slot connection is installed (outside a slot)."""
