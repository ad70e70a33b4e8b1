"""What goes wrong between a permit client and the pulsar."""
from __future__ import annotations


class PermitError(Exception):
    """The pulsar refused a request (unknown limiter, bad frame) or permits did not come in time."""


class PermitFrameError(PermitError):
    """A frame between a permit client and the pulsar that does not decode; it is dropped."""


class PermitTimeout(PermitError):
    """`acquire` gave up: fewer permits than asked came before its timeout."""
