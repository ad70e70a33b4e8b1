"""`[schedules.<name>]`: a periodic job the active manager puts (cron or every N seconds).

Checked at load: a cron expression by the cron library itself (the error says what is
wrong), a time zone by the system's zone database, a priority and data within what the
queue server accepts.
"""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEDULE_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
# A fire's job carries this much data at most (the queue server takes 1 MiB; a schedule's
# data sits in the config and in every fire's job).
MAX_SCHEDULE_DATA_BYTES = 64 * 1024
# Once a second at the most: a tick is a job, and the last tick is kept in the database.
MIN_EVERY_S = 1.0
MAX_EVERY_S = 366 * 86400.0
MAX_CATCH_UP = 10_000
# The queue server's priorities (protocol's bounds).
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1


class ScheduleConfig(BaseModel):
    # strict, as every config table (config/models.py _Strict): no value is coerced to another type.
    model_config = ConfigDict(extra="forbid", strict=True)

    cron: str | None = Field(
        default=None,
        description="When to fire: a 5-field cron expression (minute hour day-of-month month "
                    "day-of-week, e.g. \"30 2 * * *\"), read in `timezone`. Give cron or every_s.")
    every_s: float | None = Field(
        default=None, ge=MIN_EVERY_S, le=MAX_EVERY_S, allow_inf_nan=False,
        description="When to fire: every this many seconds, at whole multiples of it since "
                    "1970-01-01 UTC (so every manager agrees on the ticks), in whole milliseconds. "
                    "Give cron or every_s.")
    timezone: str = Field(
        default="UTC",
        description="The zone a cron expression is read in (an IANA name such as "
                    "Europe/Berlin; not localtime, each machine's own); daylight saving follows cron's rules: a time skipped in "
                    "spring fires right after the change, a repeated one in autumn fires once.")
    queue: str = Field(pattern=r"^[A-Za-z0-9_]{1,128}$",
                       description="The queue each fire puts its job into.")
    priority: int = Field(default=0, ge=MIN_PRIORITY, le=MAX_PRIORITY,
                          description="The fired job's priority in its queue.")
    data: str = Field(default="", description="The fired job's data (a string; JSON welcome).")
    catch_up: Literal["skip", "latest", "all"] = Field(
        default="latest",
        description="Ticks missed while no manager was active (an outage, a restart): skip "
                    "fires none of them, latest fires the most recent one, all fires each "
                    "(the newest catch_up_max). Every miss is an event.")
    catch_up_max: int = Field(default=100, ge=1, le=MAX_CATCH_UP,
                              description="With catch_up = \"all\": the most missed ticks fired after one outage "
                                          "(oldest first, 20 a pass, so other schedules' ticks stay on time).")
    enabled: bool = Field(default=True, description="false: the schedule is listed but never fires.")

    @field_validator("cron")
    @classmethod
    def _cron_is_valid(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if len(value.split()) != 5:
            raise ValueError(f"cron {value!r} must have 5 fields (minute hour day month weekday), "
                             f"it has {len(value.split())}")
        try:
            CronSim(value, datetime(2000, 1, 1, tzinfo=UTC))
        except CronSimError as exc:
            raise ValueError(f"cron {value!r}: {exc}") from None
        return value

    @field_validator("timezone")
    @classmethod
    def _zone_is_known(cls, value: str) -> str:
        # Debian's zone database links "localtime" to the machine's /etc/localtime: managers
        # on hosts set to different zones would then fire a cron at different instants.
        if value.lower() == "localtime":
            raise ValueError("timezone 'localtime' is this machine's zone, which another manager's "
                             "may not share: name the zone (an IANA name such as Europe/Berlin)")
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as UTC or Europe/Berlin)") from None
        return value

    @field_validator("every_s")
    @classmethod
    def _every_s_is_whole_ms(cls, value: float | None) -> float | None:
        # Ticks are whole multiples of the step in integer milliseconds (manager/schedules/ticks.py):
        # a step finer than that would be rounded, and two managers must agree on every tick.
        if value is not None and abs(value * 1000 - round(value * 1000)) > 1e-6:
            raise ValueError(f"every_s {value!r} must be a whole number of milliseconds")
        return value

    @field_validator("data")
    @classmethod
    def _data_is_bounded(cls, value: str) -> str:
        if len(value.encode()) > MAX_SCHEDULE_DATA_BYTES:
            raise ValueError(f"data is {len(value.encode())} bytes; at most {MAX_SCHEDULE_DATA_BYTES}")
        return value

    @model_validator(mode="after")
    def _one_rule(self) -> ScheduleConfig:
        if (self.cron is None) == (self.every_s is None):
            raise ValueError("give exactly one of cron and every_s")
        if self.every_s is not None and self.timezone != "UTC":
            raise ValueError("timezone applies to cron only (every_s counts from 1970-01-01 UTC)")
        return self
