"""Errors the server keeps to itself: no status line goes with them."""
from __future__ import annotations


class SnapshotError(Exception):
    """A snapshot or log that cannot be applied; the state it was applied to is unchanged."""


class DataDirLocked(Exception):
    """Another server already owns the data directory."""


class DataCorrupt(Exception):
    """The data directory holds damage that recovery must not pass over silently (a bad
    frame with valid frames after it, a bad snapshot): the server does not start, and the
    message names the file, the offset and what `--repair` would drop."""


class ReplicationApplyError(Exception):
    """A record from the primary that this replica cannot apply: its state may now differ
    from the primary's, so it resyncs from a snapshot (follower.py)."""
