"""The manager's config reload (SIGHUP): read and validate the file, then say what changes.

    SIGHUP -> ConfigReloader.requested -> the manager's next turn:
        load_config(path)              a bad file: ConfigError, nothing changes (log + event)
        config_diff(old, new)          what takes effect now, what waits for a restart
        queues + schedules swapped     the next plan's map carries the queue settings;
                                       the schedule thread takes the new rules between passes

Only `[queues.*]` and `[schedules.*]` take effect at a reload. Every other section (the
manager's listen address, database, intervals; the queue server's; the master's; the admin's;
the pulsar's) is bound at start (sockets, the database lock, the threads' timings), so a
change there is logged as "needs a restart" and not applied: half of an address change is worse
than none. Changed rate limits are sent to the pulsar, which holds the limiters
(manager/reloading/pulsar_limits.py).
The signal handler only sets a flag: the reload runs in the manager's loop, never inside a
signal frame.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from pydantic import BaseModel

from config.errors import ConfigError
from config.load import load_config
from config.models import ClusterConfig
from manager.reloading.pulsar_limits import LimitsSent
from manager.storage.store import EventKind, NewEvent

log = logging.getLogger(__name__)

# Sections a reload applies; every other top-level key of ClusterConfig waits for a restart.
RELOADED_SECTIONS = ("queues", "schedules")
# A diff line names fields and values of queues and schedules (no secrets live there); the
# list is cut so that one event stays small whatever the file holds.
MAX_DIFF_LINES = 50


@dataclass(frozen=True, slots=True)
class ConfigDiff:
    applied: list[str] = field(default_factory=list)   # "queues.mail.max_slots: 4 -> 8"
    restart: list[str] = field(default_factory=list)   # top-level sections that differ

    @property
    def empty(self) -> bool:
        return not self.applied and not self.restart


def config_diff(old: ClusterConfig, new: ClusterConfig) -> ConfigDiff:
    applied = _tables_diff("queues", old.queues, new.queues) + _tables_diff("schedules", old.schedules, new.schedules)
    restart = [name for name in type(old).model_fields
               if name not in RELOADED_SECTIONS and getattr(old, name) != getattr(new, name)]
    return ConfigDiff(applied=_cut(applied), restart=restart)


def _tables_diff(section: str, old: Mapping[str, BaseModel], new: Mapping[str, BaseModel]) -> list[str]:
    lines: list[str] = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name), new.get(name)
        if before is None:
            lines.append(f"{section}.{name}: added")
        elif after is None:
            lines.append(f"{section}.{name}: removed")
        elif before != after:
            was, now = before.model_dump(), after.model_dump()
            lines += [f"{section}.{name}.{key}: {was.get(key)!r} -> {now.get(key)!r}"
                      for key in sorted(set(was) | set(now)) if was.get(key) != now.get(key)]
    return lines


def _cut(lines: list[str]) -> list[str]:
    if len(lines) <= MAX_DIFF_LINES:
        return lines
    return [*lines[:MAX_DIFF_LINES], f"... and {len(lines) - MAX_DIFF_LINES} more"]


def with_reloaded(current: ClusterConfig, read: ClusterConfig) -> ClusterConfig:
    """`current` with the sections a reload applies taken from `read`."""
    return current.model_copy(update={name: getattr(read, name) for name in RELOADED_SECTIONS})


@dataclass(frozen=True, slots=True)
class Reloaded:
    config: ClusterConfig | None    # None: the file was refused, nothing changes
    diff: ConfigDiff
    error: str | None = None


class ConfigReloader:
    """The file the manager started from, and the flag SIGHUP sets."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = path
        self.requested = False

    def handle_sighup(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def reload(self, current: ClusterConfig) -> Reloaded:
        self.requested = False
        if self.path is None:
            return Reloaded(None, ConfigDiff(), "the manager runs on the embedded defaults (no --config): "
                                               "nothing to reload")
        try:
            read = load_config(self.path)
        except ConfigError as exc:
            return Reloaded(None, ConfigDiff(), str(exc))
        diff = config_diff(current, read)
        return Reloaded(with_reloaded(current, read), diff)


def reload_events(reloaded: Reloaded, sent: LimitsSent | None) -> list[NewEvent]:
    """Log what a reload did and return its event: refused (nothing changed), or applied with
    its difference, what waits for a restart, and what the pulsar said of the rate limits."""
    if reloaded.config is None:
        log.error("config reload refused, nothing changed: %s", reloaded.error)
        return [NewEvent(kind=EventKind.CONFIG_RELOAD_REFUSED,
                         message=f"config reload refused, nothing changed: {reloaded.error}",
                         detail={"error": reloaded.error})]
    diff = reloaded.diff
    changes = "; ".join(diff.applied) or "no queue or schedule changed"
    restart = f"; needs a restart to apply: {', '.join(diff.restart)}" if diff.restart else ""
    limits = ""
    if sent is not None and sent.error is not None:
        limits = f"; rate limits NOT applied: {sent.error}"
        log.error("config reload: the pulsar did not take the new rate limits: %s", sent.error)
    elif sent is not None:
        limits = f"; the pulsar took the rate limits ({'; '.join(sent.changes) or 'none changed'})"
    log.info("config reloaded: %s%s%s", changes, restart, limits)
    for line in diff.applied:
        log.info("config reload: %s", line)
    if diff.restart:
        log.warning("config reload: changed but not applied until a restart: %s", ", ".join(diff.restart))
    detail: dict[str, object] = {"applied": diff.applied, "needs_restart": diff.restart}
    if sent is not None:
        detail["pulsar"] = {"changes": sent.changes, "error": sent.error}
    return [NewEvent(kind=EventKind.CONFIG_RELOADED, message=f"config reloaded: {changes}{restart}{limits}",
                     detail=detail)]
