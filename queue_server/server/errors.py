"""Errors the server keeps to itself: no status line goes with them."""
from __future__ import annotations


class SnapshotError(Exception):
    """A snapshot or log that cannot be applied; the state it was applied to is unchanged."""


class DataDirLocked(Exception):
    """Another server already owns the data directory."""
