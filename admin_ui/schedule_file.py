"""The dashboard's `[schedules.*]` as its config file holds them now, read again when the file
changes: the manager reloads the file on SIGHUP or `POST /api/config/reload`, and a dashboard
comparing it with the schedules of its own start marked an added schedule "not in the file"
(and refused its "run now") and a reloaded change as still to be reloaded."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from config.errors import ConfigError
from config.load import load_config
from config.schedules import ScheduleConfig

log = logging.getLogger("slotmap.admin")


class ScheduleFile:
    def __init__(self, path: Path, schedules: Mapping[str, ScheduleConfig]) -> None:
        self.path = path
        self.schedules = dict(schedules)
        self._read_stamp = self._stamp()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def current(self) -> Mapping[str, ScheduleConfig]:
        """The file's schedules; the last good ones while it is missing or does not load (the
        manager refuses such a file too, and keeps firing what it fired)."""
        stamp = self._stamp()
        if stamp is None or stamp == self._read_stamp:
            return self.schedules
        self._read_stamp = stamp
        try:
            self.schedules = dict(load_config(self.path).schedules)
        except ConfigError as exc:
            log.warning("config file changed but does not load; the Schedules page compares the "
                        "manager's schedules with the file's last good ones: %s", exc)
        return self.schedules
